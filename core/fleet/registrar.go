package fleet

import (
	"errors"
	"fmt"
	"sync"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var _ storekit.PolicyRegistrar = (*fleetStore)(nil)

// RegisterPolicy implements [storekit.PolicyRegistrar]; [core.NewLimiter]
// calls it. It forwards the registration to the remote store when that is
// a storekit.PolicyRegistrar (the Redis store refuses a name a live policy of
// other limits holds), and registers a FailLocal policy's divided limits
// with the tier's embedded fallback store, so that a configuration the
// tier cannot decide fails at construction: an elastic policy over a
// remote store without storekit.ElasticStore, a conflicting name, a policy the
// fallback store cannot hold. The release function releases both and
// forgets the tier's per-policy data.
func (s *fleetStore) RegisterPolicy(p *core.Policy, replaces ...core.Registration) (core.Registration, error) {
	if p == nil {
		return nil, errors.New("fleet: RegisterPolicy: nil policy")
	}
	if p.Elastic != nil {
		if _, ok := s.remote.(storekit.ElasticStore); !ok {
			return nil, fmt.Errorf("fleet: policy %q is elastic, and the remote store %T does not implement storekit.ElasticStore; use a hard policy or the Redis store", p.Name, s.remote)
		}
	}
	reg := &registration{s: s, p: p}
	if r, ok := s.remote.(storekit.PolicyRegistrar); ok {
		var remote []core.Registration
		for _, x := range replaces {
			if f, ok := x.(*registration); ok && f.s == s && f.remote != nil {
				remote = append(remote, f.remote)
			}
		}
		var err error
		if reg.remote, err = r.RegisterPolicy(p, remote...); err != nil {
			return nil, err
		}
	}
	pi, err := s.info(p)
	if err != nil {
		reg.Release()
		return nil, err
	}
	if p.FailMode == core.FailLocal && pi.local == nil {
		reg.Release()
		return nil, fmt.Errorf("fleet: policy %q: fail mode local decides with the limits divided by the fleet size, and they do not make a valid policy; lower the fleet size (FleetSize, WithFleetSize) or use fail mode open or closed", p.Name)
	}
	if p.FailMode == core.FailLocal {
		if reg.local, err = s.local.RegisterPolicy(pi.local); err != nil {
			reg.Release()
			return nil, fmt.Errorf("fleet: policy %q: the local fallback store: %w", p.Name, err)
		}
	}
	return reg, nil
}

// registration is a Limiter's claim on the tier: its remote store's and
// its local store's.
type registration struct {
	s             *fleetStore
	p             *core.Policy
	remote, local core.Registration
	once          sync.Once
}

// Release releases both claims and forgets the tier's per-policy data.
func (r *registration) Release() {
	r.once.Do(func() {
		if r.remote != nil {
			r.remote.Release()
		}
		if r.local != nil {
			r.local.Release()
		}
		r.s.forget(r.p)
	})
}

// forget drops the tier's per-policy data of p.
func (s *fleetStore) forget(p *core.Policy) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	old := *s.policies.Load()
	if old[p] == nil {
		return
	}
	m := make(map[*core.Policy]*pinfo, len(old))
	for k, v := range old {
		if k != p {
			m[k] = v
		}
	}
	s.policies.Store(&m)
}
