package fleet

import (
	"errors"
	"fmt"

	"github.com/limitkit/limitkit/core"
)

var _ core.PolicyRegistrar = (*Store)(nil)

// RegisterPolicy implements [core.PolicyRegistrar]; [core.NewLimiter]
// calls it. It forwards the registration to the remote store when that is
// a core.PolicyRegistrar (the Redis store refuses a name a live policy of
// other limits holds), and registers a FailLocal policy's divided limits
// with the tier's embedded fallback store, so that a configuration the
// tier cannot decide fails at construction: an elastic policy over a
// remote store without core.ElasticStore, a conflicting name, a policy the
// fallback store cannot hold. The release function releases both and
// forgets the tier's per-policy data.
func (s *Store) RegisterPolicy(p *core.Policy, replaces ...*core.Policy) (func(), error) {
	if p == nil {
		return nil, errors.New("fleet: RegisterPolicy: nil policy")
	}
	if p.Elastic != nil {
		if _, ok := s.remote.(core.ElasticStore); !ok {
			return nil, fmt.Errorf("fleet: policy %q is elastic, and the remote store %T does not implement core.ElasticStore; use a hard policy or the Redis store", p.Name, s.remote)
		}
	}
	var rels []func()
	undo := func() {
		for _, r := range rels {
			r()
		}
	}
	if r, ok := s.remote.(core.PolicyRegistrar); ok {
		rel, err := r.RegisterPolicy(p, replaces...)
		if err != nil {
			return nil, err
		}
		rels = append(rels, rel)
	}
	pi, err := s.info(p)
	if err != nil {
		undo()
		return nil, err
	}
	if p.FailMode == core.FailLocal && pi.local == nil {
		undo()
		s.forget(p)
		return nil, fmt.Errorf("fleet: policy %q: fail mode local decides with the limits divided by the fleet size, and they do not make a valid policy; lower the fleet size (FleetSize, WithFleetSize) or use fail mode open or closed", p.Name)
	}
	if p.FailMode == core.FailLocal {
		rel, err := s.local.RegisterPolicy(pi.local)
		if err != nil {
			undo()
			s.forget(p)
			return nil, fmt.Errorf("fleet: policy %q: the local fallback store: %w", p.Name, err)
		}
		rels = append(rels, rel)
	}
	return func() {
		undo()
		s.forget(p)
	}, nil
}

// forget drops the tier's per-policy data of p.
func (s *Store) forget(p *core.Policy) {
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
