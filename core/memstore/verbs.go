package memstore

import (
	"context"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var (
	_ storekit.VerbStore    = (*memStore)(nil)
	_ storekit.ReserveStore = (*memStore)(nil)
)

// verb is one of the quota verbs beyond Take.
type verb uint8

const (
	verbPeek verb = iota
	verbCharge
	verbRefund
	verbReserve
)

// Peek returns the decision Take would return, consuming and storing
// nothing (core.Compiled.PeekTo), under the key's shard lock. Errors as
// Take.
func (s *memStore) Peek(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(key, p, now, cost, 0, verbPeek)
}

// Charge consumes cost even beyond the limit (core.Compiled.ChargeTo),
// atomically under the key's shard lock. Errors as Take.
func (s *memStore) Charge(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(key, p, now, cost, 0, verbCharge)
}

// Credit returns up to cost units (core.Compiled.RefundTo: the store
// side of core.Limiter.Refund), atomically
// under the key's shard lock. A key the store does not hold is full: a
// refund stores nothing for it. Errors as Take.
func (s *memStore) Credit(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(key, p, now, cost, 0, verbRefund)
}

// Reserve admits now or reserves a later admission
// (core.Compiled.ReserveTo), atomically under the key's shard lock.
// Errors as Take.
func (s *memStore) Reserve(_ context.Context, key string, p *core.Policy, now time.Time, cost int64, maxWait time.Duration) (core.Decision, error) {
	return s.verb(key, p, now, cost, maxWait.Microseconds(), verbReserve)
}

// Reset drops key's state under p: its next request is a fresh key's.
// Errors as Take.
func (s *memStore) Reset(_ context.Context, key string, p *core.Policy) error {
	t, err := s.open(p)
	if err != nil {
		return err
	}
	h, sh := t.shardOf(s.seed, key)
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		sh.delete(t, i)
	}
	sh.mu.Unlock()
	return nil
}

func (s *memStore) verb(key string, p *core.Policy, now time.Time, cost, maxWait int64, v verb) (d core.Decision, err error) {
	t, err := s.open(p)
	if err != nil {
		failed(&d, p)
		return d, err
	}
	h, sh := t.shardOf(s.seed, key)
	sh.mu.Lock()
	sh.verb(&d, t, h, now.UnixMicro(), cost, maxWait, v)
	sh.mu.Unlock()
	return d, nil
}

// verb applies v to hash h's state, inserting the key when the verb
// changes a fresh state (a peek, or a refund of a key the shard does not
// hold, stores nothing). No allocation once the shard has its scratch.
func (sh *shard) verb(d *core.Decision, t *table, h uint64, now, cost, maxWait int64, v verb) {
	if len(sh.scratch) != t.words {
		sh.scratch = make([]int64, t.words)
	}
	i := sh.find(h)
	st := sh.scratch
	if i >= 0 {
		st = sh.state(t, i)
	} else {
		clear(st)
	}
	c := t.policy
	switch v {
	case verbPeek:
		c.PeekTo(d, st, sh.scratch, now, cost)
		return
	case verbCharge:
		c.ChargeTo(d, st, now, cost)
	case verbRefund:
		c.RefundTo(d, st, now, cost)
	case verbReserve:
		c.ReserveTo(d, st, now, cost, maxWait)
	}
	if i < 0 {
		sh.keep(t, h, now, st)
	}
}
