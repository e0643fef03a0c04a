package memstore

import (
	"errors"
	"sync"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// registry is the Store's part for storekit.PolicyRegistrar.
type registry struct {
	regMu sync.Mutex // serializes registrations with the table changes they make
	reg   storekit.PolicyRegistry
}

var _ storekit.PolicyRegistrar = (*memStore)(nil)

// RegisterPolicy implements [storekit.PolicyRegistrar]; [core.NewLimiter]
// calls it. It claims p's name for p's configuration and gives the name a
// table of p's configuration now, so that a configuration the Store
// cannot hold fails here, at construction, not in Take: a name claimed
// by a live policy of other limits (algorithm, limits, buckets,
// soft_percent, count_denied, shadow, elastic ceiling), a new name beyond
// the policy cap (WithMaxPolicies), a memory budget that does not hold
// one key, or a closed Store.
//
// Equal policies share the name's table. A policy that takes the name
// over (replaces: see core.Replacing) gets a new, empty table; the old
// one stays set aside for the replaced policies, as [Store.Replace] does,
// until they are released. The release function ends the claim; the last
// claim of a name drops its table and keys, so a Store whose Limiters are
// released (rules reloads) does not grow. A table that Take created for a
// policy no Limiter registered is not registered, and is replaced by the
// first registration of another configuration.
func (s *memStore) RegisterPolicy(p *core.Policy, replaces ...core.Registration) (core.Registration, error) {
	if p == nil {
		return nil, errors.New("memstore: RegisterPolicy: nil policy")
	}
	if s.closed.Load() {
		return nil, core.ErrClosed
	}
	var claims []*storekit.PolicyClaim
	var inflight []*core.Policy
	for _, r := range replaces {
		if m, ok := r.(*registration); ok && m.s == s {
			claims = append(claims, m.claim)
			inflight = append(inflight, m.claim.Policy())
		}
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	claim, _, err := s.reg.Claim(p, claims...)
	if err != nil {
		return nil, err
	}
	if t := (*s.tables.Load())[p.Name]; t == nil || !sameConfig(t.policy.Policy(), p) {
		if _, err := s.Replace(p, inflight...); err != nil {
			claim.End()
			return nil, err
		}
	}
	return &registration{s: s, claim: claim}, nil
}

// registration is a Limiter's claim on a Store.
type registration struct {
	s     *memStore
	claim *storekit.PolicyClaim
}

// Release ends the claim; the name's last drops its table, and the table
// set aside for the policy (Replace) goes with it.
func (r *registration) Release() {
	s := r.s
	s.regMu.Lock()
	defer s.regMu.Unlock()
	p := r.claim.Policy()
	last := r.claim.End()
	s.Forget(p)
	if last {
		s.drop(p)
	}
}

// Registered is the number of policy names that live Limiters have
// registered.
func (s *memStore) Registered() int { return s.reg.Len() }

// drop removes the table of p's name when it holds p's configuration.
func (s *memStore) drop(p *core.Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.tables.Load()
	t := old[p.Name]
	if t == nil || !sameConfig(t.policy.Policy(), p) {
		return
	}
	m := make(map[string]*table, len(old))
	for k, v := range old {
		if k != p.Name {
			m[k] = v
		}
	}
	s.tables.Store(&m)
	s.last.CompareAndSwap(t, nil)
}
