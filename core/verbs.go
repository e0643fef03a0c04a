package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// deadlineMover is a store that moves a store deadline later by the
// process's recent wait to run, as its TakeBy does (the Redis store, the
// fleet tier: a starved host is not a dead store): MoveDeadline returns
// dl moved. The quota verbs' deadline moves by it too.
type deadlineMover interface {
	MoveDeadline(dl time.Time) time.Time
}

// verbsStore is a store that implements the quota verbs beyond Take
// (storekit.VerbStore documents the contract); a Limiter on a store that
// does not returns [ErrUnsupported] from Peek, Reset, Charge and Refund.
type verbsStore interface {
	Store
	Peek(ctx context.Context, key string, p *Policy, now time.Time, cost int64) (Decision, error)
	Reset(ctx context.Context, key string, p *Policy) error
	Charge(ctx context.Context, key string, p *Policy, now time.Time, cost int64) (Decision, error)
	Credit(ctx context.Context, key string, p *Policy, now time.Time, cost int64) (Decision, error)
}

// reserveStore is a store that can reserve a later admission in one
// atomic step (storekit.ReserveStore documents the contract):
// [Limiter.WaitN] uses it so that a waiter costs one store call per
// admission; without it, WaitN sleeps and retries.
type reserveStore interface {
	Store
	Reserve(ctx context.Context, key string, p *Policy, now time.Time, cost int64, maxWait time.Duration) (Decision, error)
}

// ErrUnsupported is returned (wrapped, naming the store) by a Limiter
// verb its store does not implement (see storekit.VerbStore).
var ErrUnsupported = errors.New("limitkit: the store does not implement this verb")

// ErrNeverAdmitted is returned by [Limiter.WaitN] when the cost exceeds a
// limit's capacity: no wait would admit it.
var ErrNeverAdmitted = errors.New("limitkit: the cost exceeds the limit's capacity; no wait would admit it")

// ErrWaitExceedsDeadline is returned by [Limiter.WaitN] when the wait
// before the request would be admitted outlasts the context's deadline
// (golang.org/x/time/rate's rule: return at once rather than wait in
// vain).
var ErrWaitExceedsDeadline = errors.New("limitkit: the wait would exceed the context's deadline")

func (l *Limiter) verbStore(verb string) (verbsStore, error) {
	if vs, ok := l.store.(verbsStore); ok {
		return vs, nil
	}
	return nil, fmt.Errorf("%w: %s needs a storekit.VerbStore (memstore, redisstore, fleet); %T is not one", ErrUnsupported, verb, l.store)
}

// call runs one verb on the store with the Limiter's store deadline (for a
// store that does I/O) and settles a failure as AllowN does: the policy's
// fail mode, a *StoreError, logged (a caller's own cancellation is not a
// store failure). On a store that moves its decisions' deadline for a
// starved process (deadlineMover: the Redis store, the fleet tier) the
// verbs' deadline moves the same way, so that a starved process does not
// fail a PeekDecision (counting by outcome: a login's check) or a Charge
// that the store answered in time.
func (l *Limiter) call(ctx context.Context, f func(context.Context) (Decision, error)) (Decision, error) {
	var d Decision
	var err error
	if l.local {
		d, err = f(ctx)
	} else if err = ctx.Err(); err == nil {
		dl := time.Now().Add(l.timeout)
		if m, ok := l.store.(deadlineMover); ok {
			dl = m.MoveDeadline(dl)
		}
		cctx, cancel := context.WithDeadline(ctx, dl)
		d, err = f(cctx)
		cancel()
	}
	if err != nil {
		return l.settle(ctx, d, err)
	}
	d.ElasticRoom = false
	return d, nil
}

// PeekN returns the Decision a request of cost would get now (PeekN(ctx,
// key, 1): would one more request be admitted?) (Allowed,
// Remaining, RetryAfter and ResetAfter exactly as AllowN would report
// them), consuming nothing and writing nothing. An exhausted key is
// reported denied. A cost of 0 answers as AllowN's: Remaining now,
// Allowed when a request of cost 1 would be, and the exact RetryAfter
// otherwise; for a usage screen read it through [Limiter.Usage]. The observer sees an [EventVerb] "peek", not a decision. A
// negative cost returns ErrInvalidCost; a store that does not implement
// storekit.VerbStore, ErrUnsupported; a store failure, the policy's fail-mode
// decision and a *StoreError, as AllowN.
func (l *Limiter) PeekN(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.peek(ctx, key, cost, "peek")
}

// PeekDecision is PeekN for a request that the peek decides and whose
// charge waits for its outcome (counting by outcome,
// httplimit.WithOutcome: a client over its limit is denied on the peek;
// an admitted request is charged only when its response counts). It
// consumes nothing, as PeekN, and answers as PeekN, but the observer sees
// an [EventDecision] (allowed, denied or degraded), so that metrics count
// such a request as they count AllowN's: the deny ratio of a login
// limiter shows a brute force. The Charge or Refund that settles the
// request later is an EventVerb "charge" or "refund", never a second
// decision. A usage screen that only reads a key wants PeekN.
func (l *Limiter) PeekDecision(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.peek(ctx, key, cost, "")
}

// peek is PeekN, reported to the observer as kind.
func (l *Limiter) peek(ctx context.Context, key string, cost int64, verb string) (Decision, error) {
	if cost < 0 {
		return Decision{Policy: l.policy.Name, RetryAfter: Never}, ErrInvalidCost
	}
	vs, err := l.verbStore("Peek")
	if err != nil {
		return Decision{Policy: l.policy.Name}, err
	}
	now := l.clock.Now()
	start := l.started()
	d, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
		return vs.Peek(ctx, key, l.policy, now, cost)
	})
	if err == nil && cost == 0 {
		l.peeked(ctx, &d, key, now)
	}
	l.observe(ctx, verb, d, err, start)
	return d, err
}

// Usage is what a usage screen shows for a key: see [Limiter.Usage].
type Usage struct {
	// Limit is the binding limit, the one with the least room left now
	// (of a multi-limit policy, the others have more).
	Limit Limit
	// Used is what the key has consumed of Limit's capacity (its burst,
	// or its requests when it has none): capacity − Remaining, at least
	// 0. A key charged past its limit shows the capacity, not the debt.
	Used int64
	// Remaining is the cost the key would admit now (not after one more
	// request, as Peek's Remaining). 0 when exhausted; under soft
	// throttling it counts down to 0 at the nominal limit.
	Remaining int64
	// ResetAfter is the time until the key is back to full if nothing more
	// is consumed; 0 for a key with no state.
	ResetAfter time.Duration
	// RetryAfter is 0 when Remaining > 0, else the exact wait until a
	// request of cost 1 would be admitted.
	RetryAfter time.Duration
	// Policy is the limiter's policy name.
	Policy string
	// Degraded is true when the store failed and the figures are the
	// fail mode's (see Decision.Degraded); the error says why.
	Degraded bool
	// Limits is every limit's usage, in the policy's Limits order (Limit,
	// Used, Remaining, ResetAfter, RetryAfter of that limit alone; their
	// Limits nil): of a policy with one limit, the figures above; of
	// several, read in one more store call (the embedded, Redis and fleet
	// stores; the Redis store's is one or two script calls per limit),
	// so a little after the binding figures. nil when Degraded, or when
	// the store cannot read limit by limit.
	Limits []Usage
}

// Usage reports key's usage now, for a usage screen or an operator:
// used, remaining now and when it resets, consuming nothing. It is
// PeekN(ctx, key, 0) read as a usage (see the table in docs/verbs.md): one
// store call, two for an exhausted key (its exact RetryAfter), and for a
// policy of several limits one more for every limit's figures
// (Usage.Limits). The observer sees an [EventVerb] "peek". Errors as PeekN's; a
// failure of the per-limit read is returned as a *StoreError too (the
// binding figures stand, Limits is nil). Safe for concurrent use.
func (l *Limiter) Usage(ctx context.Context, key string) (Usage, error) {
	d, err := l.PeekN(ctx, key, 0)
	u := l.usageOf(d)
	if err == nil {
		if lerr := l.limitUsages(ctx, key, &u); lerr != nil {
			err = &StoreError{Policy: l.policy.Name, Mode: l.policy.FailMode, Err: lerr}
		}
	}
	return u, err
}

// started is the start of a store call to time for the observer: the
// zero time when there is no observer or the store does no I/O.
func (l *Limiter) started() time.Time {
	if l.observer != nil && !l.local {
		return time.Now()
	}
	return time.Time{}
}

// observe sends a verb's event to the observer, if any: an EventVerb, or
// for verb "" (a peek that decides a request) an EventDecision.
func (l *Limiter) observe(ctx context.Context, verb string, d Decision, err error, start time.Time) {
	if l.observer == nil {
		return
	}
	e := Event{Kind: EventVerb, Verb: verb, Context: ctx, Policy: l.policy.Name, Err: err}
	if verb == "" {
		e.Kind = EventDecision
	}
	if verb != "reset" {
		e.Decision = d
	}
	if !start.IsZero() {
		e.Latency = time.Since(start)
	}
	l.observer.Observe(e)
}

// Reset forgets key's state under the Limiter's policy on every limit, as
// if the key had never been seen: its next request gets a full quota
// (support unblocking a user, a successful login clearing failures).
// Through the fleet tier every tier honours it within the bound the fleet
// package states. The observer sees an [EventVerb] "reset". A store failure
// returns a *StoreError (logged as AllowN's); a store that does not
// implement storekit.VerbStore, ErrUnsupported.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	vs, err := l.verbStore("Reset")
	if err != nil {
		return err
	}
	start := l.started()
	_, err = l.call(ctx, func(ctx context.Context) (Decision, error) {
		return Decision{}, vs.Reset(ctx, key, l.policy)
	})
	l.observe(ctx, "reset", Decision{}, err, start)
	return err
}

// Charge consumes cost from key's quota even beyond the limit, for work
// that already happened (tokens of a response known once it is done). A
// key charged past its limit owes the excess: it is denied until the debt
// is repaid at the normal refill rate. The debt is bounded per algorithm
// (see [Compiled.ChargeTo]: at most one full quota for GCRA and the token
// bucket, the rest of the window for the fixed window, one window for the
// sliding ones), so one huge charge never locks a key out for longer. A
// cost beyond that bound acts as the bound (no overflow).
//
// The Decision reports the key after the charge ([Compiled.ReportTo]):
// Remaining what it would still admit, Allowed whether a request of cost
// 1 would be admitted now, and if not, RetryAfter the exact wait until it
// would. The observer sees an [EventVerb] "charge" (a charge is not a
// decision). A
// negative cost returns ErrInvalidCost; errors otherwise as PeekN.
func (l *Limiter) Charge(ctx context.Context, key string, cost int64) (Decision, error) {
	if cost < 0 {
		return Decision{Policy: l.policy.Name, RetryAfter: Never}, ErrInvalidCost
	}
	vs, err := l.verbStore("Charge")
	if err != nil {
		return Decision{Policy: l.policy.Name}, err
	}
	now := l.clock.Now()
	start := l.started()
	d, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
		return vs.Charge(ctx, key, l.policy, now, cost)
	})
	l.observe(ctx, "charge", d, err, start)
	return d, err
}

// Refund returns up to cost units to key's quota (a request that failed,
// a reservation that was too large), never leaving it more than a fresh
// key's quota and never returning units to a window that has already
// ended; what is returned per algorithm is stated at
// [Compiled.RefundTo]. A refund also repays a Charge's debt. The Decision
// reports the key afterwards, as Charge's; the observer sees an
// [EventVerb] "refund". A negative cost returns
// ErrInvalidCost; errors otherwise as PeekN.
func (l *Limiter) Refund(ctx context.Context, key string, cost int64) (Decision, error) {
	if cost < 0 {
		return Decision{Policy: l.policy.Name, RetryAfter: Never}, ErrInvalidCost
	}
	vs, err := l.verbStore("Refund")
	if err != nil {
		return Decision{Policy: l.policy.Name}, err
	}
	now := l.clock.Now()
	start := l.started()
	d, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
		return vs.Credit(ctx, key, l.policy, now, cost)
	})
	l.observe(ctx, "refund", d, err, start)
	return d, err
}

// Wait is WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) error {
	return l.WaitN(ctx, key, 1)
}

// sleep waits d or until ctx is done; tests replace it.
var sleep = func(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jitter is a small random addition to a wait, so that waiters woken by
// one window boundary do not all call the store at once.
func jitter(d time.Duration) time.Duration {
	j := min(d/16, 5*time.Millisecond)
	if j <= 0 {
		return 0
	}
	return rand.N(j)
}

// WaitN blocks until a request of cost is admitted (and consumed) for
// key, or ctx ends. It returns at once with ErrNeverAdmitted when cost
// exceeds a limit's capacity, and with ErrWaitExceedsDeadline when the
// wait would outlast ctx's deadline (golang.org/x/time/rate's rule);
// ctx's error when it ends while waiting, or while a store call is out
// (then under every fail mode: the caller's own cancellation is not a
// store failure, and admits nothing); a *StoreError when the store fails
// and the fail mode does not admit (a fail-open admission returns nil).
//
// Store calls: on a storekit.ReserveStore (the embedded and Redis stores) a
// GCRA or token-bucket request that would be admitted within one full
// quota's refill time is reserved in the one call that finds it must
// wait: WaitN then sleeps until its turn and returns, one store call per
// admission, and waiters in several processes queue in the order they
// asked. Otherwise (window algorithms, longer queues) WaitN sleeps until
// the denial's exact RetryAfter plus a small jitter (at most 1/16 of it
// and 5 ms) and asks again: one call per admission when nobody else takes
// the slot first. A reservation whose wait ctx interrupts is refunded
// (best effort). Each call is a decision to the observer.
func (l *Limiter) WaitN(ctx context.Context, key string, cost int64) error {
	if cost < 0 {
		return ErrInvalidCost
	}
	rs, _ := l.store.(reserveStore)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var d Decision
		var err error
		if rs != nil && !l.policy.Shadow && l.policy.Elastic == nil {
			d, err = l.reserve(ctx, rs, key, cost)
		} else {
			d, err = l.AllowN(ctx, key, cost)
		}
		if err != nil {
			if errors.Is(err, ErrCallerDone) {
				return ctx.Err() // the caller gave up: not admitted, whatever the fail mode
			}
			if d.Allowed {
				return nil
			}
			return err
		}
		if d.Allowed {
			if d.RetryAfter <= 0 {
				return nil
			}
			// a reservation: the turn comes after RetryAfter
			if err := sleep(ctx, d.RetryAfter); err != nil {
				if vs, ok := l.store.(verbsStore); ok {
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
					_, _ = vs.Credit(rctx, key, l.policy, l.clock.Now(), cost)
					cancel()
				}
				return err
			}
			return nil
		}
		if d.RetryAfter == Never {
			return ErrNeverAdmitted
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.RetryAfter {
			return ErrWaitExceedsDeadline
		}
		wait := d.RetryAfter
		if h := l.horizon(); rs != nil && h > 0 && wait > h {
			// the queue of reservations is full: come back when this
			// request's turn is within it, and reserve then
			wait -= h
		}
		wait += jitter(wait)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// horizon is how far ahead a reserveStore reserves (one full quota's
// refill time of the policy's tightest limit, see Compiled.ReserveTo);
// 0 for algorithms that do not reserve.
func (l *Limiter) horizon() time.Duration {
	if l.policy.Algorithm != GCRA && l.policy.Algorithm != TokenBucket {
		return 0
	}
	var h time.Duration
	for i, k := range l.policy.Limits {
		t := time.Duration(effective(k.capacity(), l.policy.SoftPercent)*EmissionInterval(k)) * time.Microsecond
		if i == 0 || t < h {
			h = t
		}
	}
	return h
}

// reserve is one Reserve call, with the wait it may reserve bounded by
// ctx's deadline, observed as a decision.
func (l *Limiter) reserve(ctx context.Context, rs reserveStore, key string, cost int64) (Decision, error) {
	maxWait := time.Duration(1<<62 - 1)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(0, time.Until(dl))
	}
	now := l.clock.Now()
	start := l.started()
	d, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
		return rs.Reserve(ctx, key, l.policy, now, cost, maxWait)
	})
	l.observe(ctx, "", d, err, start)
	return d, err
}
