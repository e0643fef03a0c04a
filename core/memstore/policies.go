package memstore

import (
	"errors"
	"fmt"

	"github.com/limitkit/limitkit/core"
)

// Finding a policy's table by name, creating it on first use.

// lookup finds the table of p by name, creating it on first use.
func (s *memStore) lookup(p *core.Policy) (*table, error) {
	if p == nil {
		return nil, errors.New("memstore: nil policy")
	}
	t := (*s.tables.Load())[p.Name]
	if t == nil {
		return s.register(p)
	}
	if t.key == p {
		s.last.Store(t)
		return t, nil
	}
	if a := s.asideTable(p); a != nil {
		return a, nil // a request under way across a Replace (replace.go)
	}
	if !sameConfig(t.policy.Policy(), p) {
		return nil, conflict(p.Name)
	}
	return t, nil
}

// sameConfig reports whether a and b decide alike on one state (FailMode
// is the Limiter's business, not the store's): core.SameState.
func sameConfig(a, b *core.Policy) bool { return core.SameState(a, b) }

func conflict(name string) error {
	return fmt.Errorf("memstore: policy name %q is used by two policies with different limits or switches "+
		"(algorithm, limits, buckets, soft_percent, count_denied, shadow, elastic ceiling); give each its own name", name)
}

// register finds or creates the table of p's name.
func (s *memStore) register(p *core.Policy) (*table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.tables.Load()
	if t := old[p.Name]; t != nil {
		if t.key != p && !sameConfig(t.policy.Policy(), p) {
			return nil, conflict(p.Name)
		}
		return t, nil
	}
	c, err := p.Compile()
	if err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	if len(old) >= s.maxPolicies {
		return nil, fmt.Errorf("memstore: policy %q would be the store's %d-th policy name, above its cap of %d (WithMaxPolicies): "+
			"a policy is configuration, built once; put per-client variation in the key, not in the policy name", p.Name, len(old)+1, s.maxPolicies)
	}
	t, err := s.newTable(c)
	if err != nil {
		return nil, err
	}
	t.key = p
	m := make(map[string]*table, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[p.Name] = t
	s.tables.Store(&m)
	return t, nil
}
