package redisstore

import (
	"errors"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var _ storekit.PolicyRegistrar = (*redisStore)(nil)

// RegisterPolicy implements [storekit.PolicyRegistrar]; [core.NewLimiter]
// calls it. It claims p's name on this Store for p's configuration and
// compiles p's scripts' arguments, so that a configuration the Store
// cannot decide fails at construction. Redis keys carry a digest of each
// limit's parameters ("Keys"), so two policies of one name and other
// limits would silently keep two quotas: a claim of a name that a live
// policy of other limits (algorithm, limits, buckets, soft_percent,
// count_denied, shadow, elastic ceiling) holds is an error, unless p takes
// the name over (replaces, see core.Replacing: a rules reload). Equal
// policies share the name and the state. The registry is this Store's,
// in this process: servers that share one Redis with different limits
// under one name are not detected (give each configuration its own name).
// The release function ends the claim and forgets p's compiled form; it
// does no I/O (the keys expire by their TTL).
func (s *redisStore) RegisterPolicy(p *core.Policy, replaces ...core.Registration) (core.Registration, error) {
	if p == nil {
		return nil, errors.New("redisstore: RegisterPolicy: nil policy")
	}
	if _, err := s.policy(p); err != nil {
		return nil, err
	}
	var claims []*storekit.PolicyClaim
	for _, r := range replaces {
		if c, ok := r.(*registration); ok && c.s == s {
			claims = append(claims, c.claim)
		}
	}
	claim, _, err := s.reg.Claim(p, claims...)
	if err != nil {
		s.forget(p)
		return nil, err
	}
	return &registration{s: s, claim: claim}, nil
}

// registration is a Limiter's claim on a Store.
type registration struct {
	s     *redisStore
	claim *storekit.PolicyClaim
}

// Release ends the claim and forgets the policy's compiled form.
func (r *registration) Release() {
	r.claim.End()
	r.s.forget(r.claim.Policy())
}

// forget drops p's compiled form from the cache.
func (s *redisStore) forget(p *core.Policy) {
	s.mu.Lock()
	delete(s.compiled, p)
	s.mu.Unlock()
}

// Registered is the number of policy names that live Limiters have
// registered with this Store.
func (s *redisStore) Registered() int { return s.reg.Len() }
