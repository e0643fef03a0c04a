package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// DefaultTimeout is the deadline a Limiter gives each call to a store that
// does I/O, unless the request's context has an earlier one.
const DefaultTimeout = 50 * time.Millisecond

// Limiter applies one Policy through one Store. Allow is what most callers
// want; AllowN charges a cost other than 1.
//
// A Limiter reads time from its Clock (by default the system clock as of
// its last millisecond tick, read with two atomic loads per decision;
// WithClock(SystemClock{}) reads the clock itself, at the cost of a vDSO
// call per decision) and gives every call to a remote store its own deadline (DefaultTimeout, or
// the request's earlier one). When the store fails or times out, the
// decision follows the policy's FailMode and the call returns a
// *StoreError alongside it: callers use the decision. The Limiter also
// logs store failures itself, at most one line per 10 s
// (see [WithLogger]), so that a failing store is never silent.
//
// The zero Limiter is not usable; build one with NewLimiter. A Limiter is
// safe for concurrent use.
type Limiter struct {
	store    Store
	bounded  deadlineStore // store, when it takes deadlines itself (remote stores only)
	policy   *Policy
	clock    Clock
	timeout  time.Duration
	local    bool
	observer Observer
	log      storeLog
	fast     bool           // local store, no observer, not elastic: Take's decision is the answer unless it fails
	fastEl   bool           // the same for an elastic policy: the answer unless it fails or hints at room
	coarse   bool           // clock is coarseClock
	replaces []Registration // Replacing: the registrations this Limiter takes over from
	reg      Registration   // the store registration (storekit.PolicyRegistrar), or nil
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock makes the Limiter read time from c (default: the system clock
// as of its last millisecond tick, see [Limiter]):
// a *ManualClock in tests, [SystemClock] where a decision must use the
// exact instant. Stores with their own clock (Redis by default) ignore it.
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithTimeout sets the per-call store deadline (default DefaultTimeout).
// It must be > 0.
func WithTimeout(d time.Duration) Option { return func(l *Limiter) { l.timeout = d } }

// WithObserver sends every decision of the Limiter to o as an
// [EventDecision] (with the store call's latency and error for stores that
// do I/O, and the caller's context), every peek (cost 0) as an
// [EventVerb] "peek", and Charge, Refund and Reset as EventVerb "charge",
// "refund" and "reset" (see [Observer]). nil, the default, observes nothing and costs nothing.
func WithObserver(o Observer) Option { return func(l *Limiter) { l.observer = o } }

// WithLogger sends the Limiter's store-failure lines to logger instead of
// slog.Default() (read at each line, so a later slog.SetDefault applies).
// WithLogger(nil) silences them; a caller that does so should watch the
// errors AllowN returns or the metrics instead.
//
// A failure that came after the caller's own context was done (it
// cancelled, or its deadline passed: [ErrCallerDone]) is the caller's, not
// the store's: it is logged at DEBUG with kind canceled, and not counted.
// A line is logged at level ERROR when the store fails, at most once per
// log interval ([WithLogInterval]); it carries the policy, the fail mode and
// what it did to requests, the error's kind ([ClassifyError]: timeout,
// connection, circuit_open, other), the number of failures since the
// previous line, the store's error and a hint. A success costs nothing.
func WithLogger(logger *slog.Logger) Option {
	return func(l *Limiter) { l.log.logger, l.log.set = logger, true }
}

// WithLogInterval sets the least time between two store-failure lines of
// the Limiter (default 10 s), measured on the Limiter's
// clock; failures in between are counted into the next line. It must be
// > 0.
func WithLogInterval(d time.Duration) Option { return func(l *Limiter) { l.log.interval = d } }

// Replacing makes the new Limiter take its policy name over from old
// Limiters of other limits on a store that registers policy names (see
// storekit.PolicyRegistrar; memstore, redisstore and the fleet tier do): what a
// rules reload that changes a rule's limits needs, while requests under
// the old rule finish through the old Limiters. Without it, NewLimiter
// refuses a policy whose name another live Limiter uses with other
// limits. The name is taken over only when old lists every live Limiter
// of the name's current limits on the store; otherwise NewLimiter fails,
// saying how many are not listed. The old Limiters keep deciding until
// they are released; call their Release once no request uses them. Old
// Limiters of another name, or already replaced, are ignored.
func Replacing(old ...*Limiter) Option {
	return func(l *Limiter) {
		for _, o := range old {
			if o != nil && o.reg != nil {
				l.replaces = append(l.replaces, o.reg)
			}
		}
	}
}

// NewLimiter validates policy and returns a Limiter applying it through
// store. The policy is copied: changing it afterwards has no effect.
//
// Build a Limiter once per policy (at start-up) and share it: it is safe
// for concurrent use, and building one validates and copies the policy.
// Limiters built from equal policies (same name, same limits) on one store
// share its per-key state, so a Limiter built per request still limits.
//
// On a store that registers policy names (storekit.PolicyRegistrar: memstore,
// redisstore, the fleet tier) NewLimiter registers the policy and fails
// when the store cannot decide it: another live Limiter on the store uses
// the name with other limits (algorithm, limits, buckets, soft percentage,
// CountDenied, Shadow or elastic ceiling; see [SameState]), the store's
// policy cap is reached, or the store cannot hold its state. Each error
// says what to change. [Limiter.Release] ends the registration.
//
// A nil store (what memstore.New, redisstore.New and fleet.New return
// with an error), or a typed nil (a *T of a store written elsewhere whose
// constructor error was ignored), is an error here, never a panic later.
func NewLimiter(store Store, policy Policy, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("core: NewLimiter: nil store; use memstore.MustNew() (or memstore.New()) for the embedded store")
	}
	if err := checkNilStore("NewLimiter", store); err != nil {
		return nil, err
	}
	policy.Limits = slices.Clone(policy.Limits)
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{store: store, policy: &policy, clock: coarseClock{}, timeout: DefaultTimeout}
	l.log.interval = defaultLogInterval
	for _, o := range opts {
		o(l)
	}
	if l.clock == nil {
		return nil, fmt.Errorf("core: policy %q: WithClock(nil); pass a Clock", policy.Name)
	}
	if l.timeout <= 0 {
		return nil, fmt.Errorf("core: policy %q: WithTimeout(%v); the store deadline must be > 0", policy.Name, l.timeout)
	}
	if l.log.interval <= 0 {
		return nil, fmt.Errorf("core: policy %q: WithLogInterval(%v); the interval between store-failure lines must be > 0", policy.Name, l.log.interval)
	}
	if ls, ok := store.(localStore); ok && ls.Local() {
		l.local = true
	}
	if ds, ok := store.(deadlineStore); ok && !l.local {
		l.bounded = ds
	}
	l.fast = l.local && l.observer == nil && policy.Elastic == nil
	l.fastEl = l.local && l.observer == nil && policy.Elastic != nil
	if policy.Elastic != nil {
		if _, ok := store.(elasticStore); !ok {
			return nil, fmt.Errorf("core: policy %q: elastic throttling needs a store that implements storekit.ElasticStore (memstore, redisstore, fleet); %T does not", policy.Name, store)
		}
	}
	_, l.coarse = l.clock.(coarseClock)
	if policy.FailMode == FailLocal && !l.local {
		if fs, ok := store.(fallbackStore); !ok || !fs.FallsBackLocally() {
			return nil, fmt.Errorf("core: policy %q: fail mode local needs a store that falls back to a local store (put the fleet tier in front of the remote store) ; use open or closed with this store", policy.Name)
		}
	}
	if r, ok := store.(policyRegistrar); ok {
		reg, err := r.RegisterPolicy(l.policy, l.replaces...)
		if err != nil {
			return nil, err
		}
		l.reg = reg
	}
	l.replaces = nil
	return l, nil
}

// Release ends the Limiter's registration of its policy on the store (see
// storekit.PolicyRegistrar): when it was the last live Limiter of its policy's
// name, the store may drop the name's per-key state, and the name is free
// for a policy of other limits. Call it when a Limiter is retired (a rules
// reload does, once the requests under the old rules are done); a Limiter
// that lives as long as its store need not call it. Do not use the
// Limiter afterwards: its keys may be decided afresh. Release is
// idempotent and safe for concurrent use; on a store that does not
// register policies it does nothing.
func (l *Limiter) Release() {
	if l.reg != nil {
		l.reg.Release()
	}
}

// MustNewLimiter is NewLimiter that panics on a configuration error; for
// package-level variables and start-up code.
func MustNewLimiter(store Store, policy Policy, opts ...Option) *Limiter {
	l, err := NewLimiter(store, policy, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

// Policy returns the limiter's (validated) policy. Do not modify it.
func (l *Limiter) Policy() *Policy { return l.policy }

// Allow is AllowN(ctx, key, 1). (It calls the shared decision path
// itself: inlined, a call of AllowN would copy the Decision once more.)
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.decide(ctx, key, time.Time{}, true, 1)
}

// AllowN charges cost to key and reports whether the request may proceed.
// A negative cost returns ErrInvalidCost with a denying decision.
//
// Cost 0 is a peek, here and in [Check]: it consumes nothing and reports
// whether a request of cost 1 would be allowed now, with Remaining what
// the key admits now (not after one more request, as Peek's). An
// exhausted key (Remaining 0) is reported denied (Shadowed under a Shadow
// policy), with RetryAfter the exact wait until a request of cost 1 would
// be admitted (on a storekit.VerbStore: the embedded, Redis and fleet stores;
// ResetAfter, an upper bound, on another store); under soft throttling a
// peek reports denied once the nominal limit is spent, although the soft
// margin would still admit (RetryAfter is then ResetAfter). docs/verbs.md
// tabulates Peek, PeekN(0), AllowN(0) and Usage per algorithm. A
// peek never draws elastic capacity, and goes to the observer as an
// [EventVerb] "peek", not as a decision.
//
// On a store failure or timeout, AllowN returns the policy's FailMode
// decision (Degraded set) and a *StoreError. A remote store is not called
// at all when ctx is already done (an earlier check of a hybrid decision
// used up the request's store time): that is a failure too.
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (Decision, error) {
	// small enough to inline: the caller calls decide itself, which
	// reads the clock (BenchmarkHotKeyWrittenOut measures the frame)
	return l.decide(ctx, key, time.Time{}, true, cost)
}

// Clock returns the limiter's clock (the default clock unless
// [WithClock]): a caller that passes instants to [Limiter.AllowNAt] reads
// them from it, so that they follow the Limiter's time.
func (l *Limiter) Clock() Clock { return l.clock }

// AllowNAt is AllowN at the given instant instead of the clock's now, for
// callers that already read the clock (a middleware that also formats an
// epoch reset header reads [Limiter.Clock] once for both) and for
// replaying traffic. Stores with their own clock (Redis by default)
// ignore now.
func (l *Limiter) AllowNAt(ctx context.Context, key string, now time.Time, cost int64) (Decision, error) {
	return l.decide(ctx, key, now, false, cost)
}

// decide is the one decision path of Allow, AllowN, AllowNAt and
// AllowAll. Its fast paths: a local store without an observer, whose
// Take's decision is the answer unless it fails (an elastic policy's
// too, unless the decision hints at room under the ceiling);
// BenchmarkAllowN measures them. Everything else goes through allowNAt.
// With read set, now is the Limiter's clock's reading (AllowN), not the
// argument.
func (l *Limiter) decide(ctx context.Context, key string, now time.Time, read bool, cost int64) (d Decision, err error) {
	if read {
		// the default clock's Now, written out (an atomic load while
		// its ticker runs): a call would cost as much as the decision
		if !l.coarse {
			now = l.clock.Now()
		} else if p := coarse.now.Load(); p.read.Load() {
			now = p.t
		} else {
			now = coarseNow()
		}
	}
	if l.fast && cost > 0 {
		if d, err = l.store.Take(ctx, key, l.policy, now, cost); err != nil {
			return l.settle(ctx, d, err)
		}
		return d, nil
	}
	if l.fastEl && cost > 0 {
		// an elastic policy: the elastic half only on a denial the
		// ceiling would admit
		if d, err = l.store.Take(ctx, key, l.policy, now, cost); err != nil {
			return l.settle(ctx, d, err)
		}
		if d.ElasticRoom {
			d = l.elasticTake(ctx, key, now, cost, d)
		}
		return d, nil
	}
	return l.allowNAt(ctx, key, now, cost)
}

func (l *Limiter) allowNAt(ctx context.Context, key string, now time.Time, cost int64) (Decision, error) {
	if cost < 0 {
		return Decision{Policy: l.policy.Name, RetryAfter: Never}, ErrInvalidCost
	}
	var d Decision
	var err error
	var start time.Time
	if l.local {
		d, err = l.store.Take(ctx, key, l.policy, now, cost)
	} else {
		if l.observer != nil {
			start = time.Now()
		}
		d, err = l.remoteTake(ctx, key, now, cost)
	}
	kind, verb := EventDecision, ""
	if cost == 0 {
		kind, verb = EventVerb, "peek"
	}
	if err != nil {
		d, err = l.settle(ctx, d, err)
	} else if cost == 0 {
		l.peeked(ctx, &d, key, now)
	} else if d.ElasticRoom {
		d = l.elasticTake(ctx, key, now, cost, d)
	}
	if l.observer != nil {
		e := Event{Kind: kind, Verb: verb, Context: ctx, Policy: l.policy.Name, Decision: d, Err: err}
		if !start.IsZero() {
			e.Latency = time.Since(start)
		}
		l.observer.Observe(e)
	}
	return d, err
}

// remoteTake is a remote store's Take within the per-call deadline: the
// store's TakeBy when it bounds its own calls, else Take under a
// context.WithTimeout.
func (l *Limiter) remoteTake(ctx context.Context, key string, now time.Time, cost int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	if l.bounded != nil {
		return l.bounded.TakeBy(ctx, time.Now().Add(l.timeout), key, l.policy, now, cost)
	}
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return l.store.Take(cctx, key, l.policy, now, cost)
}

// peeked turns the store's decision of a cost of 0 into a peek's: denied
// when no request of cost 1 would be (see AllowN), with the exact wait
// until one would be: a storekit.VerbStore's peek of cost 1 (a second store call,
// made only for an exhausted key), else ResetAfter, an upper bound.
func (l *Limiter) peeked(ctx context.Context, d *Decision, key string, now time.Time) {
	d.ElasticRoom = false
	if !d.Allowed || d.Shadowed || d.Remaining > 0 {
		return
	}
	d.RetryAfter = max(d.ResetAfter, time.Microsecond)
	if vs, ok := l.store.(verbsStore); ok {
		one, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
			return vs.Peek(ctx, key, l.policy, now, 1)
		})
		if err == nil && (!one.Allowed || one.Shadowed) {
			d.RetryAfter = one.RetryAfter
		}
	}
	if l.policy.Shadow {
		d.Shadowed = true
	} else {
		d.Allowed = false
	}
}

// settle is the decision and error of a store failure: the policy's fail
// mode, and a *StoreError, logged (see WithLogger). A timeout or
// cancellation while the caller's ctx is done (it cancelled, or its own
// deadline passed; not the store deadline of the Limiter or of AllowAll)
// is marked [ErrCallerDone].
func (l *Limiter) settle(ctx context.Context, d Decision, err error) (Decision, error) {
	if ctx.Err() != nil && context.Cause(ctx) != errStoreBudget {
		if k := classify(err); k == kindTimeout || k == kindCanceled {
			err = fmt.Errorf("%w: %w", ErrCallerDone, err)
		}
	}
	mode := l.policy.FailMode
	switch {
	case !d.Degraded:
		d = l.failed(err)
	// A store that applied a fallback itself (the fleet tier: FailLocal,
	// or its WithDefaultFailMode for a policy that sets none) returns a
	// Degraded decision: keep it, and report the mode it applied.
	case d.Limit.Requests > 0:
		mode = FailLocal
	case !d.Allowed:
		mode = FailClosed
	}
	se := &StoreError{Policy: l.policy.Name, Mode: mode, Err: err}
	l.logFailure(ctx, se, d)
	return d, se
}

// failed is the decision of the policy's fail mode. FailLocal reaches here
// only when a storekit.FallbackStore failed without deciding; it then admits, as
// FailOpen does.
func (l *Limiter) failed(error) Decision {
	d := Decision{Policy: l.policy.Name, Degraded: true, Allowed: l.policy.FailMode != FailClosed}
	if !d.Allowed {
		d.RetryAfter = time.Second
	}
	return d
}

// errStoreBudget is the cause of AllowAll's shared store deadline: its
// expiry is the store's slowness, not the caller's.
var errStoreBudget = errors.New("limitkit: the checks' shared store deadline passed")

// ErrCallerDone marks (wrapped, with the store's error) a store failure
// that came after the caller's own context was done: the caller cancelled
// the request or its own deadline passed before the store answered.
// [ClassifyError] reports it as "canceled", and the Limiter logs it
// at DEBUG, not as a store failure.
var ErrCallerDone = errors.New("limitkit: the caller's context is done")

// Check is one (limiter, key, cost) of a hybrid decision: the user's policy
// on the user's key and the IP's policy on the IP, say.
type Check struct {
	Limiter *Limiter
	Key     string
	// Cost is the cost to charge, as AllowN's: 0 is a peek, which
	// consumes nothing (write 1 for a request).
	Cost int64
}

// AllowAll decides checks in order and allows only when every check allows.
// It stops at the first denial, so later checks consume nothing; earlier
// ones have consumed (put the most restrictive check first).
//
// The checks share one store deadline: the longest timeout of their
// limiters that call a remote store, from the first call (or the ctx's
// earlier deadline). Once it has passed, the remaining remote checks are not
// sent and fail at once, so a hung store costs a request one deadline, not
// one per check.
//
// It returns the
// binding decision: the denying one, or when all allow, the one with the
// least Remaining. A store failure under FailOpen continues with the next
// check and its error is returned at the end; under FailClosed it stops.
// With no checks it allows.
func AllowAll(ctx context.Context, checks ...Check) (Decision, error) {
	best := Decision{Allowed: true, Remaining: -1}
	var firstErr error
	var budget time.Duration
	for i := range checks {
		if l := checks[i].Limiter; !l.local && l.timeout > budget {
			budget = l.timeout
		}
	}
	if budget > 0 && len(checks) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, budget, errStoreBudget)
		defer cancel()
	}
	for i := range checks {
		c := &checks[i]
		d, err := c.Limiter.AllowN(ctx, c.Key, c.Cost)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if !d.Allowed {
			return d, firstErr
		}
		if d.Degraded && !best.Degraded && best.Remaining >= 0 {
			continue // a degraded decision carries no limit to report
		}
		if best.Remaining < 0 || best.Degraded || d.Remaining < best.Remaining ||
			d.Remaining == best.Remaining && d.Shadowed && !best.Shadowed {
			best = d
		}
	}
	if best.Remaining < 0 {
		best.Remaining = 0
	}
	return best, firstErr
}
