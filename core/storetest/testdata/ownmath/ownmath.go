// Package ownmath is a core.Store written outside limitkit's module, with
// only its public API, that does its own arithmetic: single-limit GCRA
// and fixed-window policies (with or without CountDenied and Shadow) are
// decided, peeked, charged and refunded by the code of this file, on a
// state of its own; every other policy (the other algorithms, several
// limits, soft or elastic limits) is decided by core's model (Compiled's
// DecideTo, PeekTo, ChargeTo, RefundTo), as a store may do for what it
// does not implement. It keeps its policy registry with
// storekit.PolicyRegistry.
//
// It exists so that storetest's differential, verbs and registry suites
// are proven to run, and to catch a wrong store, from outside the module:
// storetest's TestExternalStore builds this module against the checkout
// and runs its TestConformance, which must report the Differential and
// verb subtests of the policies decided here. A toy: one mutex, no bound
// on its keys.
//
// Its arithmetic is the one core documents (core/algo.go, its
// algo_*.go files and core/verbs_model.go state it), re-derived here; if core's model ever
// changes, this file must follow, as any store's.
package ownmath

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
	reg    storekit.PolicyRegistry
	mu     sync.Mutex
	tables map[string]*table // by policy name and configuration
}

var (
	_ storekit.VerbStore       = (*Store)(nil)
	_ storekit.PolicyRegistrar = (*Store)(nil)
)

// table is one policy configuration's keys. own reports whether this
// package decides it; otherwise c, core's model, does, on core's state.
type table struct {
	p    core.Policy
	own  bool
	c    *core.Compiled
	keys map[string][]int64

	// own arithmetic's constants, in µs: the capacity, GCRA's emission
	// interval and tolerance (capa × t), the fixed window's length.
	capa, t, tau, w int64
}

// What a decision may write: nothing (a peek, a report), only an
// admission, or a denial too (CountDenied).
const (
	evalOnly = iota
	writeIfOK
	writeAlways
)

// res is one evaluation of the own arithmetic, in µs.
type res struct {
	ok                      bool
	remaining, reset, retry int64
	never                   bool // the cost exceeds the capacity
}

// Take applies cost to key under p at now.
func (s *Store) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, st, err := s.state(key, p)
	if err != nil {
		return core.Decision{}, err
	}
	if !t.own {
		return t.c.Decide(st, now.UnixMicro(), cost), nil
	}
	mode := writeIfOK
	if p.CountDenied {
		mode = writeAlways
	}
	return t.decision(t.step(st, clampNow(now), max(cost, 0), mode)), nil
}

// Peek is the decision a request of cost would get, consuming nothing.
func (s *Store) Peek(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(key, p, now, cost, 'P')
}

// Reset forgets key's state under p.
func (s *Store) Reset(_ context.Context, key string, p *core.Policy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _, err := s.state(key, p)
	if err != nil {
		return err
	}
	delete(t.keys, key)
	return nil
}

// Charge consumes cost even beyond the limit: GCRA's theoretical arrival
// time moves on by cost × t, to at most two full quotas ahead of now; the
// fixed window's count grows, to at most the capacity.
func (s *Store) Charge(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(key, p, now, cost, 'C')
}

// Credit returns up to cost units: GCRA's arrival time moves back by
// cost × t, never before now (a full bucket); the fixed window in force
// counts fewer, never below 0 (an ended window gets nothing back).
func (s *Store) Credit(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(key, p, now, cost, 'R')
}

// RegisterPolicy claims p's name for p's configuration; core's registry
// keeps the count and writes the errors.
func (s *Store) RegisterPolicy(p *core.Policy, replaces ...core.Registration) (core.Registration, error) {
	var claims []*storekit.PolicyClaim
	for _, r := range replaces {
		if c, ok := r.(*storekit.PolicyClaim); ok {
			claims = append(claims, c)
		}
	}
	c, _, err := s.reg.Claim(p, claims...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// verb applies v to key: 'P' a peek, 'C' a charge, 'R' a refund.
func (s *Store) verb(key string, p *core.Policy, now time.Time, cost int64, v byte) (core.Decision, error) {
	if cost < 0 {
		return core.Decision{}, core.ErrInvalidCost
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, st, err := s.state(key, p)
	if err != nil {
		return core.Decision{}, err
	}
	var d core.Decision
	switch {
	case !t.own && v == 'P':
		t.c.PeekTo(&d, st, make([]int64, len(st)), now.UnixMicro(), cost)
	case !t.own && v == 'C':
		t.c.ChargeTo(&d, st, now.UnixMicro(), cost)
	case !t.own:
		t.c.RefundTo(&d, st, now.UnixMicro(), cost)
	case v == 'P':
		mode := writeIfOK
		if p.CountDenied {
			mode = writeAlways
		}
		d = t.decision(t.step(append([]int64(nil), st...), clampNow(now), cost, mode))
	default:
		d = t.apply(st, clampNow(now), cost, v == 'C')
	}
	return d, nil
}

// apply charges (or refunds) cost on st at now (µs) and reports the key's
// state afterwards.
func (t *table) apply(st []int64, n, cost int64, charge bool) core.Decision {
	cost = min(cost, 2*t.capa+1) // beyond it every result saturates
	t.step(st, n, 0, evalOnly)   // normalize a clock step first
	switch {
	case cost == 0: // nothing to charge or return
	case t.p.Algorithm == core.GCRA && charge:
		st[0] = max(st[0], min(max(st[0], n)+cost*t.t, n+2*t.tau))
	case t.p.Algorithm == core.GCRA:
		if st[0] > n {
			st[0] = max(n, st[0]-cost*t.t)
		}
	default:
		idx, count := t.window(st, n)
		if charge {
			st[0], st[1] = idx, max(count, min(count+cost, t.capa))
		} else if count > 0 {
			st[0], st[1] = idx, max(0, count-cost)
		}
	}
	// The key's state afterwards: the room of a request of cost 0, and
	// whether (and when) one of cost 1 would be admitted.
	r0 := t.step(append([]int64(nil), st...), n, 0, evalOnly)
	r1 := t.step(append([]int64(nil), st...), n, 1, evalOnly)
	return t.decision(res{ok: r1.ok, remaining: r0.remaining, reset: r0.reset, retry: r1.retry, never: r1.never})
}

// state returns p's table and key's state in it, made on first use.
func (s *Store) state(key string, p *core.Policy) (*table, []int64, error) {
	name := p.Name + "\x00" + p.StateString()
	t, ok := s.tables[name]
	if !ok {
		var err error
		if t, err = newTable(p); err != nil {
			return nil, nil, err
		}
		if s.tables == nil {
			s.tables = map[string]*table{}
		}
		s.tables[name] = t
	}
	st, ok := t.keys[key]
	if !ok {
		words := 2
		if !t.own {
			words = t.c.StateWords()
		}
		st = make([]int64, words) // all zero: a fresh key
		t.keys[key] = st
	}
	return t, st, nil
}

func newTable(p *core.Policy) (*table, error) {
	c, err := p.Compile() // validates p
	if err != nil {
		return nil, err
	}
	t := &table{p: *c.Policy(), c: c, keys: map[string][]int64{}}
	_, _, _, calendar := c.CalendarPeriod(0, 0) // calendar periods: core's math (its zone arithmetic)
	t.own = len(p.Limits) == 1 && p.SoftPercent == 0 && p.Elastic == nil && !calendar &&
		(p.Algorithm == core.GCRA || p.Algorithm == core.FixedWindow)
	if t.own {
		l := p.Limits[0]
		t.capa = l.Requests
		if l.Burst > 0 {
			t.capa = l.Burst
		}
		t.t = core.EmissionInterval(l)
		t.tau = t.capa * t.t
		t.w = int64(l.Window / time.Microsecond)
	}
	return t, nil
}

// step decides a request of cost at now (µs) on st, the own state: GCRA's
// [theoretical arrival time], the fixed window's [index, count].
func (t *table) step(st []int64, now, cost int64, mode int) res {
	cost = min(cost, t.capa+1) // every cost above the capacity decides alike
	if t.p.Algorithm == core.GCRA {
		// An arrival time more than two quotas ahead is a clock that went
		// back: read it as an empty bucket at now.
		if st[0]-now > 2*t.tau {
			st[0] = now + t.tau
		}
		tat := max(st[0], now)
		next := tat + cost*t.t
		if next-now <= t.tau {
			if mode != evalOnly && cost > 0 {
				st[0] = next
			}
			return res{ok: true, remaining: (t.tau - (next - now)) / t.t, reset: next - now}
		}
		r := res{reset: tat - now, retry: next - t.tau - now, never: cost*t.t > t.tau}
		if mode == writeAlways {
			st[0] = max(tat, min(next, now+t.tau))
			r.reset = st[0] - now
		}
		return r
	}
	idx, count := t.window(st, now)
	if count != 0 && st[0] > idx {
		st[0] = idx // a window more than one ahead: its count is carried to idx's
	}
	end := (idx + 1) * t.w
	if count+cost <= t.capa {
		if mode != evalOnly && cost > 0 {
			st[0], st[1] = idx, count+cost
		}
		return res{ok: true, remaining: t.capa - count - cost, reset: end - now}
	}
	if mode == writeAlways {
		st[0], st[1] = idx, min(count+cost, t.capa)
	}
	return res{reset: end - now, retry: end - now, never: cost > t.capa}
}

// window is the fixed window in force at now and its count: now's window,
// or the next one when a concurrent caller that read the clock later has
// already opened it; an ended window counts 0.
func (t *table) window(st []int64, now int64) (idx, count int64) {
	idx, count = now/t.w, st[1]
	switch {
	case count == 0:
	case st[0] < idx:
		count = 0
	case st[0] == idx+1:
		idx++
	}
	return idx, count
}

func (t *table) decision(r res) core.Decision {
	d := core.Decision{Allowed: r.ok, Limit: t.p.Limits[0], Policy: t.p.Name, ResetAfter: time.Duration(r.reset) * time.Microsecond}
	if r.ok {
		d.Remaining = r.remaining
		return d
	}
	d.RetryAfter = time.Duration(r.retry) * time.Microsecond
	if r.never {
		d.RetryAfter = core.Never
	}
	if t.p.Shadow {
		d.Allowed, d.Shadowed = true, true
	}
	return d
}

func clampNow(now time.Time) int64 {
	return min(max(now.UnixMicro(), 0), core.MaxNow)
}
