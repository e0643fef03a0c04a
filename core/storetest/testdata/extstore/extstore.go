// Package extstore is a core.Store written outside limitkit's module with
// only its public API: one map under one mutex, deciding with core's own
// math (Policy.Compile, Compiled.DecideTo). A toy — its key count is not
// bounded — that shows what a store author writes, including the optional
// storekit.LocalStore (a Limiter then takes its fast path), and runs the
// conformance suite of core/storetest; storetest's TestExternalStore
// builds and tests this module against the checkout it runs in.
package extstore

import (
	"context"
	"sync"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// Store keeps every key's state in memory. The zero value is ready; it is
// safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	policies map[string]*table // by policy name: copies of a policy share its state
}

// table is one policy's compiled form and its keys' states. A policy of
// the same name and other limits would share it: a real store refuses
// that at NewLimiter (storekit.PolicyRegistrar).
type table struct {
	c    *core.Compiled
	keys map[string][]int64
}

var _ storekit.LocalStore = (*Store)(nil)

// Local reports true: the store does no I/O (storekit.LocalStore).
func (s *Store) Local() bool { return true }

// Take applies cost to key under p at now: one atomic check-and-consume
// under the store's lock.
func (s *Store) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (d core.Decision, err error) {
	err = s.takeTo(key, p, now, cost, &d)
	return d, err
}

// takeTo is Take writing the decision into *d; it does not keep d. A
// call that fails consumes nothing.
func (s *Store) takeTo(key string, p *core.Policy, now time.Time, cost int64, d *core.Decision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.policies[p.Name]
	if !ok {
		c, err := p.Compile()
		if err != nil {
			*d = core.Decision{}
			return err
		}
		if s.policies == nil {
			s.policies = map[string]*table{}
		}
		t = &table{c: c, keys: map[string][]int64{}}
		s.policies[p.Name] = t
	}
	st, ok := t.keys[key]
	if !ok {
		st = make([]int64, t.c.StateWords()) // all zero: a fresh key
		t.keys[key] = st
	}
	t.c.DecideTo(d, st, now.UnixMicro(), cost)
	return nil
}
