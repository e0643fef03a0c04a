package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// The decision path: Take and TakeElastic, and Refund.

// Take applies cost to key under p at now, atomically (see core.Store).
// It returns core.ErrClosed after Close, and an error for an invalid
// policy, one whose name is already used by a policy with other limits,
// or a new name beyond the Store's policy cap.
func (s *memStore) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (d core.Decision, err error) {
	t := s.last.Load()
	if t == nil || t.key != p || s.closed.Load() {
		err = s.decide(&d, key, p, now, cost, false)
		return d, err
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(&d, t, h, us, cost, false)
	sh.mu.Unlock()
	return d, nil
}

// takeTo is Take writing the decision into *d, which it overwrites
// whole, and returning only the error. d must not be nil; takeTo does not
// keep it. A call that returns an error consumes no quota.
func (s *memStore) takeTo(key string, p *core.Policy, now time.Time, cost int64, d *core.Decision) error {
	t := s.last.Load()
	if t == nil || t.key != p || s.closed.Load() {
		return s.decide(d, key, p, now, cost, false)
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(d, t, h, us, cost, false)
	sh.mu.Unlock()
	return nil
}

var _ storekit.ElasticStore = (*memStore)(nil)

// TakeElastic applies cost to key under the elastic policy p at now
// against its limits raised to the elastic ceiling, atomically under the
// key's lock (see storekit.ElasticStore and core.Compiled.DecideElasticTo).
// For a policy without Elastic it is Take. Errors as Take.
func (s *memStore) TakeElastic(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (d core.Decision, err error) {
	err = s.decide(&d, key, p, now, cost, true)
	return d, err
}

// decide is Take, takeTo (or TakeElastic) through the policy lookup: for
// a policy other than the last one used, or after Close.
func (s *memStore) decide(d *core.Decision, key string, p *core.Policy, now time.Time, cost int64, elastic bool) error {
	t, err := s.open(p)
	if err != nil {
		failed(d, p)
		return err
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(d, t, h, us, cost, elastic)
	sh.mu.Unlock()
	return nil
}

// open is p's table (lookup), or core.ErrClosed after Close.
func (s *memStore) open(p *core.Policy) (*table, error) {
	t, err := s.lookup(p)
	if err == nil && s.closed.Load() {
		return nil, core.ErrClosed
	}
	return t, err
}

// failed is the decision of a call that returned an error: empty but
// for the policy's name.
func failed(d *core.Decision, p *core.Policy) {
	*d = core.Decision{}
	if p != nil {
		d.Policy = p.Name
	}
}

var _ storekit.Refunder = (*memStore)(nil)

// Refund gives cost back to key under p at now, under the key's lock (see
// storekit.Refunder): what a CapacityLimit releases. It returns an error for
// a policy that is not Refundable, and core.ErrClosed after Close.
func (s *memStore) Refund(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) error {
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
