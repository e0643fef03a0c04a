package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// maxCeilingPercent bounds Elastic.CeilingPercent: a ceiling of 10× the
// limit.
const maxCeilingPercent = 1000

// Elastic configures elastic throttling, the third style of the design
// notes beside hard and soft: "the number of requests can go above the
// limit if resources are available". A request that the policy's limits
// deny is admitted anyway when both
//
//   - the elastic ceiling has room: every limit raised to CeilingPercent
//     percent of itself (200 = twice the limit) would admit it, counting
//     every earlier admission, nominal and elastic; and
//   - the capacity Signal says the service has room for it.
//
// Otherwise the decision is exactly the hard limit's (the same Decision,
// the same headers). An elastic admission is marked [Decision.Elastic];
// it reports the nominal limit with Remaining 0, so headers keep
// advertising the limit the client is entitled to.
//
// What the ceiling bounds, per algorithm (k = CeilingPercent/100, each
// limit's capacity rounded down: 10 × 150% = 15):
//
//   - FixedWindow: at most k × Requests per window.
//   - SlidingWindowLog: at most k × Requests in any Window (exact).
//   - SlidingWindowCounter: the weighted estimate stays within k × Requests.
//   - GCRA and TokenBucket: the bucket may be overdrawn down to
//     −(k − 1) × Burst; the refill rate is unchanged. Elastic capacity is
//     a larger burst, repaid at the nominal rate: a client that took
//     elastic admissions is denied nominally until the overdraft has
//     refilled, and over a long period it gets the nominal rate. Use a
//     window algorithm for a raised sustained rate while the service is
//     idle.
//
// Every limit of the policy must have room under its ceiling, as a
// multi-limit decision is all-or-nothing. The ceilings hold exactly under
// any concurrency: the elastic admission is decided in the same atomic
// step as the key's state (under the key's lock in memory, in one Lua
// script on Redis), against a state that counts the elastic admissions.
//
// Cost: a request within its limits pays nothing for elasticity (the
// signal is not asked). A denied request pays, in the store's decision,
// an evaluation of the ceiling; when the ceiling has room, a call of the
// signal and a second atomic take (a second round trip on Redis).
//
// Fairness: spare capacity goes to whoever asks first. A heavy client can
// take all of it (up to its own ceiling) before a lighter one asks,
// unless the signal itself is bounded per client. The ceiling bounds what
// one key can take; a [CapacityLimit] bounds what all keys together take;
// neither reserves spare capacity for anyone.
//
// An Elastic is configuration: do not modify it after it has been handed
// to a Limiter or a store.
type Elastic struct {
	// CeilingPercent is how far above each limit an elastic admission may
	// go, as a percentage of the limit: 200 allows up to twice each limit.
	// Must be in (100, 1000] (at most 10× the limit) and raise every limit by at
	// least one request.
	CeilingPercent int `json:"ceiling_percent" yaml:"ceiling_percent"`
	// Signal says whether the service has room for an elastic admission.
	// Required. See [CapacityLimit], [LoadBelow] and [AllSignals].
	Signal CapacitySignal `json:"-" yaml:"-"`
}

// ceiling is capacity raised to the ceiling, rounded down.
func (e *Elastic) ceiling(capa int64) int64 {
	return capa * int64(e.CeilingPercent) / 100
}

// CapacitySignal says whether the service has spare capacity for an
// elastic admission. The [Limiter] calls Acquire only for requests its
// limits deny and its elastic ceiling would admit; cost is the request's
// cost.
//
// Acquire reports room (true) or none (false); an error counts as no room
// (the request is decided by the hard limit) and is not logged by the
// Limiter: a signal that can fail reports its failures itself (a
// [CapacityLimit]'s Limiter logs its store's). Acquire may consume
// capacity (a CapacityLimit does). A signal whose capacity can be handed
// back also has a method Release(ctx context.Context, cost int64), which
// the Limiter calls when the elastic take that followed an Acquire that
// reported room did not admit above the limit (another request of the
// same key reached the ceiling in between, or the key's quota came back).
// Signals without it lose that capacity until it refills: conservative
// (fewer elastic admissions), never more.
//
// Implementations must be safe for concurrent use and should be fast:
// Acquire runs on the request path.
type CapacitySignal interface {
	Acquire(ctx context.Context, cost int64) (bool, error)
}

// capacityReleaser is a [CapacitySignal] with the optional Release
// method.
type capacityReleaser interface {
	Release(ctx context.Context, cost int64)
}

// elasticStore is a store that can decide elastic policies
// (storekit.ElasticStore documents the contract): Take sets
// [Decision].ElasticRoom on a denial the ceiling would admit, and
// TakeElastic applies cost against the limits raised to the ceiling.
type elasticStore interface {
	Store
	TakeElastic(ctx context.Context, key string, p *Policy, now time.Time, cost int64) (Decision, error)
}

// checkSignal rejects an AllSignals, at any depth, with no signal or a
// nil one.
func checkSignal(sig CapacitySignal) error {
	a, ok := sig.(allSignals)
	if !ok {
		return nil
	}
	if len(a) == 0 {
		return errors.New("AllSignals() with no signal would always have room; pass at least one")
	}
	for i, s := range a {
		if s == nil {
			return fmt.Errorf("AllSignals argument %d is nil", i)
		}
		if err := checkSignal(s); err != nil {
			return err
		}
	}
	return nil
}

// validateElastic checks p.Elastic against the rest of p.
func (p *Policy) validateElastic() error {
	e := p.Elastic
	if e == nil {
		return nil
	}
	switch {
	case e.CeilingPercent <= 100 || e.CeilingPercent > maxCeilingPercent:
		return fmt.Errorf("core: policy %q: elastic ceiling must be in (100%%, %d%%], got %d%% (200%% lets each limit be exceeded up to twice)", p.Name, maxCeilingPercent, e.CeilingPercent)
	case e.Signal == nil:
		return fmt.Errorf("core: policy %q: elastic needs a capacity signal (core.CapacityLimit, core.LoadBelow or your own core.CapacitySignal)", p.Name)
	case p.SoftPercent != 0:
		return fmt.Errorf("core: policy %q: soft_percent and elastic are two throttling styles; use one of them", p.Name)
	case p.CountDenied:
		return fmt.Errorf("core: policy %q: count_denied punishes requests over the limit, elastic admits them when there is room; use one of them", p.Name)
	case p.Shadow:
		return fmt.Errorf("core: policy %q: shadow (a dry run that only reports denials) and elastic (which admits above the limit and draws on the capacity signal) do not combine: a shadow denial would take real capacity; drop one of them", p.Name)
	}
	if err := checkSignal(e.Signal); err != nil {
		return fmt.Errorf("core: policy %q: elastic signal: %w", p.Name, err)
	}
	if cl, ok := e.Signal.(*CapacityLimit); ok && (cl == nil || cl.limiter == nil) {
		return fmt.Errorf("core: policy %q: elastic signal: build the capacity limit with core.NewCapacityLimit", p.Name)
	}
	for i, l := range p.Limits {
		capa := l.capacity()
		ceil := e.ceiling(capa)
		switch {
		case ceil <= capa:
			return fmt.Errorf("core: policy %q: limits[%d] (%s): elastic ceiling %d%% admits no request above it (%d × %d%% rounds down to %d); raise the ceiling", p.Name, i, l, e.CeilingPercent, capa, e.CeilingPercent, ceil)
		case ceil > maxRequests:
			return fmt.Errorf("core: policy %q: limits[%d] (%s): the elastic ceiling %d exceeds %d; lower the ceiling or the limit", p.Name, i, l, ceil, maxRequests)
		case p.Algorithm == SlidingWindowLog && ceil > maxLogRequests:
			return fmt.Errorf("core: policy %q: limits[%d] (%s): the sliding log keeps one timestamp per request up to the elastic ceiling; %d is above %d (use the sliding counter or a lower ceiling)", p.Name, i, l, ceil, maxLogRequests)
		case (p.Algorithm == GCRA || p.Algorithm == TokenBucket) && (ceil*EmissionInterval(l) > maxSpan || ceil*EmissionInterval(l)/EmissionInterval(l) != ceil):
			return fmt.Errorf("core: policy %q: limits[%d] (%s): the elastic ceiling × refill interval exceeds 30 years; lower the ceiling or the burst", p.Name, i, l)
		}
	}
	return nil
}

// room reports whether the elastic ceiling would admit cost at now on
// state, consuming nothing.
func (c *Compiled) room(state []int64, now, cost int64) bool {
	for i := range c.el {
		k := &c.el[i]
		if !c.step(k, state[k.off:k.off+k.sz], now, cost, evalOnly).ok {
			return false
		}
	}
	return true
}

// decideElastic is DecideElasticTo returning the decision (for tests).
func (c *Compiled) decideElastic(state []int64, now, cost int64) (d Decision) {
	c.DecideElasticTo(&d, state, now, cost)
	return d
}

// DecideElasticTo is the elastic take of an storekit.ElasticStore on a key's
// state: DecideTo with every limit raised to the policy's elastic ceiling.
// It consumes only when every raised limit admits, sets d.Elastic when
// the admission took a limit above its nominal capacity, and reports the
// nominal binding limit and nominal Remaining (0 when above). A denied
// decision's RetryAfter is the wait for the ceiling, not for the nominal
// limit. For a policy without Elastic it is DecideTo.
func (c *Compiled) DecideElasticTo(d *Decision, state []int64, now, cost int64) {
	if c.el == nil {
		c.DecideTo(d, state, now, cost)
		return
	}
	*d = Decision{}
	if cost < 0 {
		cost = 0
	}
	now = min(max(now, 0), MaxNow)
	if len(c.el) == 1 {
		k := &c.el[0]
		r := c.step(k, state[:k.sz], now, cost, writeIfOK)
		c.decision(d, k, r)
		d.Elastic = r.ok && r.remaining < k.soft
		return
	}
	d.Elastic, _ = c.decideN(d, c.el, state, now, cost)
}

// elasticTake is the elastic half of a decision whose nominal take, d,
// was denied with ElasticRoom: ask the signal, then take against the
// ceiling. It returns the elastic admission, or d (the hard limit's
// decision) when the signal has no room, errs, or the ceiling was reached
// in between.
func (l *Limiter) elasticTake(ctx context.Context, key string, now time.Time, cost int64, d Decision) Decision {
	d.ElasticRoom = false
	sig := l.policy.Elastic.Signal
	es, ok := l.store.(elasticStore) // checked by NewLimiter
	if !ok {
		return d
	}
	if ok, err := sig.Acquire(ctx, cost); !ok || err != nil {
		return d
	}
	var e Decision
	var err error
	if l.local {
		e, err = es.TakeElastic(ctx, key, l.policy, now, cost)
	} else if err = ctx.Err(); err == nil {
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		e, err = es.TakeElastic(cctx, key, l.policy, now, cost)
		cancel()
	}
	if err != nil || !e.Elastic {
		if r, ok := sig.(capacityReleaser); ok {
			r.Release(ctx, cost)
		}
		if err != nil || !e.Allowed {
			return d
		}
	}
	e.ElasticRoom = false
	return e
}

// CapacityLimit is the fleet-wide capacity signal: a hard [Limiter] on one
// shared key whose limit is the extra load the service can take above its
// clients' limits ("5000 per 1m"). Every elastic admission consumes its
// cost from it; nominal admissions do not. On a shared store (Redis) every
// server of the fleet draws from the one quota, so the fleet as a whole
// admits at most that limit elastically, exactly, whatever the number of
// servers. A request that found room but was then not admitted
// elastically (another request of the same key reached its ceiling in
// between: hundreds of concurrent requests of one client all find room)
// gives it back through Release, so one key never holds more capacity
// than the elastic admissions it received, when the capacity Limiter's
// store is a storekit.Refunder and its policy [Policy.Refundable] (GCRA, the
// default and what the rules package builds, or fixed window). Otherwise
// the capacity is kept until it refills: conservative for the fleet, but
// one client can then spend the capacity on requests it was never
// admitted for.
//
// It reports no room when the Limiter denies, fails (the Limiter logs its
// store's failures) or decides Degraded or Shadowed. Build it with
// [NewCapacityLimit]; it is safe for concurrent use.
type CapacityLimit struct {
	limiter *Limiter
	key     string
}

// NewCapacityLimit returns the capacity signal drawing from key under l.
// l's policy must not itself be elastic.
func NewCapacityLimit(l *Limiter, key string) (*CapacityLimit, error) {
	if l == nil {
		return nil, errors.New("core: NewCapacityLimit: nil Limiter; build one with NewLimiter on the store the fleet shares")
	}
	if l.policy.Elastic != nil {
		return nil, fmt.Errorf("core: NewCapacityLimit: policy %q is elastic; a capacity limit must be hard", l.policy.Name)
	}
	if key == "" {
		return nil, errors.New("core: NewCapacityLimit: empty key; name the shared capacity (e.g. \"capacity\")")
	}
	return &CapacityLimit{limiter: l, key: key}, nil
}

// Acquire charges cost to the shared key and reports whether it fit. A
// CapacityLimit not built by NewCapacityLimit reports no room and an
// error.
func (c *CapacityLimit) Acquire(ctx context.Context, cost int64) (bool, error) {
	if c == nil || c.limiter == nil {
		return false, errors.New("core: CapacityLimit not built with NewCapacityLimit")
	}
	d, err := c.limiter.AllowN(ctx, c.key, cost)
	if err != nil {
		return false, err
	}
	return d.Allowed && !d.Shadowed && !d.Degraded, nil
}

var _ capacityReleaser = (*CapacityLimit)(nil)

// Release gives back cost that an Acquire reporting room took, when the
// capacity Limiter's store can (see [CapacityLimit]); otherwise it does
// nothing. A failed refund is not logged: the capacity is then kept,
// which is conservative.
func (c *CapacityLimit) Release(ctx context.Context, cost int64) {
	if c == nil || c.limiter == nil || cost <= 0 || !c.limiter.policy.Refundable() {
		return
	}
	l := c.limiter
	r, ok := l.store.(refunder)
	if !ok {
		return
	}
	if l.local {
		_ = r.Refund(ctx, c.key, l.policy, l.clock.Now(), cost)
		return
	}
	if ctx.Err() != nil {
		// the request is gone, the capacity must still come back
		ctx = context.WithoutCancel(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	_ = r.Refund(cctx, c.key, l.policy, l.clock.Now(), cost)
	cancel()
}

// refunder is a store that can give back what a Take admitted, for a
// policy that [Policy.Refundable] says can be refunded
// (storekit.Refunder documents the contract): it lets a [CapacityLimit]
// release capacity.
type refunder interface {
	Store
	Refund(ctx context.Context, key string, p *Policy, now time.Time, cost int64) error
}

// Refundable reports whether a storekit.Refunder can give back what a Take of p
// admitted: a hard GCRA policy, whose state (one theoretical arrival time
// per limit) moves back by cost × the emission interval, exactly undoing
// the take unless the key's bucket refilled completely in between (then
// the refund cannot credit more than cost); or a hard fixed-window
// policy, whose count in force goes down by cost (not below 0), exactly
// undoing the take unless its window ended in between (a refund after
// the take's window ended returns nothing, or credits the new window
// when a take already opened it).
func (p *Policy) Refundable() bool {
	return p != nil && (p.Algorithm == GCRA || p.Algorithm == FixedWindow) && p.Elastic == nil
}

// For store implementers: Refund gives cost back to a key's state at now
// (see storekit.Refunder); it reports false, changing nothing, for a policy that
// is not [Policy.Refundable].
func (c *Compiled) Refund(state []int64, now, cost int64) bool {
	if !c.p.Refundable() {
		return false
	}
	cost = max(cost, 0)
	for i := range c.limits {
		k := &c.limits[i]
		st := state[k.off : k.off+k.sz]
		if c.p.Algorithm == GCRA {
			if st[0] > now {
				st[0] = max(st[0]-cost*k.t, now)
			}
			continue
		}
		// fixed window: the count in force (now's window, or a later one
		// as fixedWindow keeps it)
		count := st[0] & fwCountMask
		stored := uint64(st[0]) >> fwCountBits
		if diff := int64((uint64(k.index(now))-stored)<<fwCountBits) >> fwCountBits; count > 0 && diff <= 0 {
			st[0] = int64(stored<<fwCountBits) | (count - min(cost, count))
		}
	}
	return true
}

// InFlight counts the requests a service is handling: the load that
// [LoadBelow] compares with a threshold. The adapters count into it when
// configured with httplimit.WithInFlight (Enter before deciding, Exit when
// the rest of the chain has returned); code can count any other work with
// Enter and Exit. The zero InFlight is
// ready to use (no request in flight); it is safe for concurrent use and
// costs one atomic add per Enter and per Exit.
type InFlight struct {
	n atomic.Int64
}

// Enter counts one request in.
func (f *InFlight) Enter() { f.n.Add(1) }

// Exit counts one request out; call it once per Enter.
func (f *InFlight) Exit() { f.n.Add(-1) }

// Load returns the number of requests in flight.
func (f *InFlight) Load() int64 { return f.n.Load() }

// LoadBelow is the in-process load signal: room while at most Max
// requests are in flight (counted by InFlight, the asking request
// included when the middleware counts it). It reads a gauge and reserves
// nothing: requests that ask at the same instant all see the same load,
// so the in-flight count can pass Max by the number of concurrent
// elastic admissions; it is a load signal, not a quota (combine it with a
// [CapacityLimit] through [AllSignals] for an exact bound). Each server
// judges its own load. The zero value has no counter and reports no room.
type LoadBelow struct {
	// InFlight is the counter the middleware maintains.
	InFlight *InFlight
	// Max is the most requests in flight at which elastic admissions are
	// still granted.
	Max int64
}

// Acquire reports whether the load is at most Max.
func (s LoadBelow) Acquire(context.Context, int64) (bool, error) {
	return s.InFlight != nil && s.InFlight.Load() <= s.Max, nil
}

// AllSignals returns a signal with room only when every one of signals
// has room, asked in order (put the cheapest, such as a LoadBelow, first:
// later ones are not asked once one says no). When a later signal says no
// or fails, the earlier ones that have a Release method are released.
// The result has a Release method (releasing those that can).
func AllSignals(signals ...CapacitySignal) CapacitySignal {
	return allSignals(append([]CapacitySignal(nil), signals...))
}

type allSignals []CapacitySignal

func (a allSignals) Acquire(ctx context.Context, cost int64) (bool, error) {
	for i, s := range a {
		ok, err := s.Acquire(ctx, cost)
		if !ok || err != nil {
			a[:i].Release(ctx, cost)
			return false, err
		}
	}
	return true, nil
}

func (a allSignals) Release(ctx context.Context, cost int64) {
	for _, s := range a {
		if r, ok := s.(capacityReleaser); ok {
			r.Release(ctx, cost)
		}
	}
}
