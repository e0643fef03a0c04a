package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
)

// The decision path: Take, TakeTo and TakeElastic, and Refund.

// Take applies cost to key under p at now, atomically (see core.Store).
// It returns core.ErrClosed after Close, and an error for an invalid
// policy, one whose name is already used by a policy with other limits,
// or a new name beyond the Store's policy cap.
func (s *Store) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (d core.Decision, err error) {
	t := s.last.Load()
	if t == nil || t.key != p || s.closed.Load() {
		err = s.takeSlow(&d, key, p, now, cost)
		return d, err
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(&d, t, h, us, cost, false)
	sh.mu.Unlock()
	return d, nil
}

// TakeTo is Take writing the decision into *d, which it overwrites
// whole, and returning only the error: for a caller that keeps the
// decision in a larger result and calls the Store directly (the
// middleware adapters, when [core.Limiter.DirectStore] is this Store),
// so that no Decision is copied on the way. d must not be nil; TakeTo
// does not keep it. A call that returns an error consumes no quota.
func (s *Store) TakeTo(_ context.Context, key string, p *core.Policy, now time.Time, cost int64, d *core.Decision) error {
	t := s.last.Load()
	if t == nil || t.key != p || s.closed.Load() {
		return s.takeSlow(d, key, p, now, cost)
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(d, t, h, us, cost, false)
	sh.mu.Unlock()
	return nil
}

// takeSlow is TakeTo for a policy other than the last one used, or after
// Close. (Take and TakeTo each write out their common case: a shared
// function costs a hot-key decision 5 of its 40 ns.)
func (s *Store) takeSlow(d *core.Decision, key string, p *core.Policy, now time.Time, cost int64) error {
	t, err := s.lookup(p)
	if err != nil {
		*d = core.Decision{}
		if p != nil {
			d.Policy = p.Name
		}
		return err
	}
	if s.closed.Load() {
		*d = core.Decision{Policy: p.Name}
		return core.ErrClosed
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(d, t, h, us, cost, false)
	sh.mu.Unlock()
	return nil
}

var _ core.ElasticStore = (*Store)(nil)

// TakeElastic applies cost to key under the elastic policy p at now
// against its limits raised to the elastic ceiling, atomically under the
// key's lock (see core.ElasticStore and core.Compiled.DecideElasticTo).
// For a policy without Elastic it is Take. Errors as Take.
func (s *Store) TakeElastic(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	t, err := s.lookup(p)
	if err != nil {
		var d core.Decision
		if p != nil {
			d.Policy = p.Name
		}
		return d, err
	}
	if s.closed.Load() {
		return core.Decision{Policy: p.Name}, core.ErrClosed
	}
	h, sh := t.shardOf(s.seed, key)
	var d core.Decision
	sh.mu.Lock()
	sh.take(&d, t, h, now.UnixMicro(), cost, true)
	sh.mu.Unlock()
	return d, nil
}

var _ core.Refunder = (*Store)(nil)

// Refund gives cost back to key under p at now, under the key's lock (see
// core.Refunder): what a CapacityLimit releases. It returns an error for
// a policy that is not Refundable, and core.ErrClosed after Close.
func (s *Store) Refund(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) error {
	t, err := s.lookup(p)
	if err != nil {
		return err
	}
	if !p.Refundable() {
		return fmt.Errorf("memstore: policy %q cannot be refunded (only a hard GCRA or fixed-window policy can)", p.Name)
	}
	if s.closed.Load() {
		return core.ErrClosed
	}
	h, sh := t.shardOf(s.seed, key)
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		t.policy.Refund(sh.state(t, i), now.UnixMicro(), cost)
	}
	sh.mu.Unlock()
	return nil
}
