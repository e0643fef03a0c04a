package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLease is the lease of a [ConcurrencyPolicy] that sets none.
const DefaultLease = 30 * time.Second

// MaxLease bounds [ConcurrencyPolicy.Lease]: a crashed holder's slot comes
// back within the lease, so a longer one is a misconfiguration.
const MaxLease = 24 * time.Hour

// ConcurrencyPolicy is an in-flight (concurrency) limit: at most Max
// requests of one key hold a slot at once, from admission until they
// release it. The zero value is invalid (no name, Max 0).
type ConcurrencyPolicy struct {
	// Name identifies the limit in decisions and store keys; the rules of
	// [Policy.Name] apply. Concurrency limiters of one name on one store
	// share their keys' slots.
	Name string
	// Max is the most slots one key holds at once; >= 1.
	Max int64
	// Lease is how long a slot stays held without being renewed: the
	// slot of a holder that crashed (or leaked its release) comes back
	// within it. A live holder renews its slots every Lease/3, so work
	// may run longer than the lease. 0 means [DefaultLease]; otherwise
	// 1 s .. [MaxLease].
	Lease time.Duration
	// FailMode is what Acquire decides when the store fails: FailOpen
	// (the default) admits holding nothing, FailClosed denies. FailLocal
	// is not supported (an error at construction).
	FailMode FailMode
}

// SlotStore is the optional store interface of concurrency limits: a
// [Store] that implements it can back a [Concurrency] (memstore,
// redisstore, and the fleet tier when its remote store does). A store
// without it is an error in [NewConcurrency].
//
// A key's state is a set of holder tokens, each with an expiry (its
// lease). Both calls are atomic; implementations must be safe for
// concurrent use and return an error only when the store itself failed.
type SlotStore interface {
	Store
	// AcquireSlot drops key's expired holders (expiry <= now) under p,
	// then: if token holds a slot already, moves its expiry to now +
	// p.Lease (a renewal; ok true whatever the count); else, if fewer
	// than p.Max hold one, adds token with that expiry (ok true); else
	// changes nothing (ok false). held is the number of holders after the
	// call. A remote store may read now from its own clock (redisstore
	// reads Redis TIME by default). p.Lease is never 0 here.
	AcquireSlot(ctx context.Context, key string, p *ConcurrencyPolicy, token uint64, now time.Time) (held int64, ok bool, err error)
	// ReleaseSlot removes token from key's holders under p (nothing if it
	// holds no slot).
	ReleaseSlot(ctx context.Context, key string, p *ConcurrencyPolicy, token uint64) error
}

// Concurrency limits how many requests of one key are in flight at once
// (see [ConcurrencyPolicy]). Build it with [NewConcurrency]; the zero
// value is not usable. Safe for concurrent use.
//
// Renewal: while any slot is held, one timer per Concurrency renews every
// held slot each Lease/3 (one AcquireSlot per slot); the timer is not
// re-armed once no slot is held, so an idle Concurrency holds no timer and
// no goroutine. A renewal that fails (store down, or the slot expired and
// was taken meanwhile) is retried at the next tick; the holder keeps
// running.
//
// RetryAfter of a denial: the mean time the slots of this Concurrency
// were held (an exponentially weighted mean over released slots, weight
// 1/8, measured on its clock), rounded up to a whole second, at least 1 s
// and at most the lease; 1 s before any slot was released. It is a
// hint, not a promise: a slot frees when a holder finishes.
type Concurrency struct {
	store   SlotStore
	p       ConcurrencyPolicy
	l       Limiter // the options (clock, timeout, logger); decides nothing
	local   bool
	limit   Limit
	meanUS  atomic.Int64 // mean hold time in µs; 0: none observed
	mu      sync.Mutex
	held    slot // sentinel of the ring of held slots, under mu
	renewOn bool // the renewal timer is armed
	every   time.Duration
}

// slot is one held slot.
type slot struct {
	c     *Concurrency
	key   string
	token uint64
	at    time.Time
	done  atomic.Bool
	prev  *slot // the ring of held slots, under c.mu
	next  *slot
}

// NewConcurrency validates p and returns a Concurrency over store, which
// must implement [SlotStore]. It takes the Limiter options WithClock,
// WithTimeout, WithLogger, WithLogInterval and WithObserver (others are
// ignored); the observer gets an [EventInFlight] for each slot taken and
// given back.
func NewConcurrency(store Store, p ConcurrencyPolicy, opts ...Option) (*Concurrency, error) {
	if store == nil {
		return nil, fmt.Errorf("core: NewConcurrency: nil store; use memstore.MustNew() for the embedded store")
	}
	if err := checkNilStore("NewConcurrency", store); err != nil {
		return nil, err
	}
	ss, ok := store.(SlotStore)
	if !ok {
		return nil, fmt.Errorf("core: concurrency limit %q: the store %T cannot hold in-flight slots (it does not implement core.SlotStore); use memstore, redisstore, or the fleet tier over redisstore", p.Name, store)
	}
	if err := (&Policy{Name: p.Name}).validateName(); err != nil {
		return nil, err
	}
	if p.Max < 1 {
		return nil, fmt.Errorf("core: concurrency limit %q: max %d must be >= 1", p.Name, p.Max)
	}
	if p.Lease == 0 {
		p.Lease = DefaultLease
	}
	if p.Lease < time.Second || p.Lease > MaxLease {
		return nil, fmt.Errorf("core: concurrency limit %q: lease %v must be between 1s and %v", p.Name, p.Lease, MaxLease)
	}
	switch p.FailMode {
	case FailOpen, FailClosed:
	default:
		return nil, fmt.Errorf("core: concurrency limit %q: fail mode %s is not supported; use open or closed", p.Name, p.FailMode)
	}
	c := &Concurrency{store: ss, p: p, every: p.Lease / 3}
	c.held.prev, c.held.next = &c.held, &c.held
	c.l = Limiter{clock: coarseClock{}, timeout: DefaultTimeout}
	c.l.log.interval = DefaultLogInterval
	for _, o := range opts {
		o(&c.l)
	}
	if c.l.clock == nil {
		return nil, fmt.Errorf("core: concurrency limit %q: WithClock(nil); pass a Clock", p.Name)
	}
	if c.l.timeout <= 0 || c.l.log.interval <= 0 {
		return nil, fmt.Errorf("core: concurrency limit %q: WithTimeout and WithLogInterval must be > 0", p.Name)
	}
	c.l.policy = &Policy{Name: p.Name, FailMode: p.FailMode}
	if ls, ok := store.(LocalStore); ok && ls.Local() {
		c.local = true
	}
	c.limit = Limit{Requests: p.Max, Window: p.Lease}
	return c, nil
}

// Policy returns the limit (with its Lease filled in). Do not modify it.
func (c *Concurrency) Policy() *ConcurrencyPolicy { return &c.p }

// Acquire takes a slot of key. On admission it returns a release function
// that frees the slot: call it once the work is done (defer it); it is
// idempotent and safe to call from any goroutine. On denial, and when the
// store failed, release is a no-op (never nil) and nothing is held.
//
// The Decision: Allowed, Limit {Max, Lease}, Remaining the slots still
// free after this one; on denial Remaining 0 and RetryAfter (and
// ResetAfter) as described on [Concurrency]. When the store fails, the
// decision follows the FailMode (Degraded set; FailClosed waits 1 s) and
// the error is a *[StoreError]; the decision then has no Limit, as a
// [Limiter]'s under a fail mode.
func (c *Concurrency) Acquire(ctx context.Context, key string) (release func(), d Decision, err error) {
	now := c.l.clock.Now()
	token := rand.Uint64()
	held, ok, err := c.acquire(ctx, key, token, now)
	if err != nil {
		d, err = c.l.settle(ctx, Decision{}, err)
		return noop, d, err
	}
	d = Decision{Allowed: ok, Limit: c.limit, Policy: c.p.Name}
	if !ok {
		d.RetryAfter = c.retryAfter()
		d.ResetAfter = d.RetryAfter
		return noop, d, nil
	}
	d.Remaining = max(c.p.Max-held, 0)
	s := &slot{c: c, key: key, token: token, at: now}
	c.hold(s)
	return s.release, d, nil
}

func noop() {}

// acquire calls the store, bounded by the timeout for a remote store.
func (c *Concurrency) acquire(ctx context.Context, key string, token uint64, now time.Time) (int64, bool, error) {
	if c.local {
		return c.store.AcquireSlot(ctx, key, &c.p, token, now)
	}
	ctx, cancel := context.WithTimeout(ctx, c.l.timeout)
	defer cancel()
	return c.store.AcquireSlot(ctx, key, &c.p, token, now)
}

// retryAfter is the mean hold time, whole seconds, in [1 s, lease].
func (c *Concurrency) retryAfter() time.Duration {
	m := time.Duration(c.meanUS.Load()) * time.Microsecond
	m = (m + time.Second - 1).Truncate(time.Second)
	return min(max(m, time.Second), c.p.Lease)
}

// hold records s for renewal, arming the timer if none is.
func (c *Concurrency) hold(s *slot) {
	c.mu.Lock()
	s.prev, s.next = c.held.prev, &c.held
	c.held.prev.next = s
	c.held.prev = s
	arm := !c.renewOn
	c.renewOn = true
	c.mu.Unlock()
	c.inFlight(1)
	if arm {
		time.AfterFunc(c.every, c.renewTick)
	}
}

// renewTick renews the held slots and re-arms the timer while any is held.
func (c *Concurrency) renewTick() {
	if c.renew() {
		time.AfterFunc(c.every, c.renewTick)
	}
}

// renew renews every held slot once; it reports whether any is held (and
// leaves the timer armed then).
func (c *Concurrency) renew() bool {
	c.mu.Lock()
	var slots []*slot
	for s := c.held.next; s != &c.held; s = s.next {
		slots = append(slots, s)
	}
	if len(slots) == 0 {
		c.renewOn = false
	}
	c.mu.Unlock()
	for _, s := range slots {
		if s.done.Load() {
			continue
		}
		now := c.l.clock.Now()
		if _, _, err := c.acquire(context.Background(), s.key, s.token, now); err != nil {
			c.l.logFailure(context.Background(), &StoreError{Policy: c.p.Name, Mode: c.p.FailMode, Err: fmt.Errorf("renewing an in-flight slot: %w", err)}, Decision{Allowed: true})
		}
	}
	return len(slots) > 0
}

// release frees the slot once.
func (s *slot) release() {
	if s.done.Swap(true) {
		return
	}
	c := s.c
	c.mu.Lock()
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	c.mu.Unlock()
	c.inFlight(-1)
	hold := c.l.clock.Now().Sub(s.at).Microseconds()
	if hold < 0 {
		hold = 0
	}
	for {
		old := c.meanUS.Load()
		next := hold
		if old != 0 {
			next = old + (hold-old)/8
		}
		if next == 0 {
			next = 1
		}
		if c.meanUS.CompareAndSwap(old, next) {
			break
		}
	}
	var err error
	if c.local {
		err = c.store.ReleaseSlot(context.Background(), s.key, &c.p, s.token)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), c.l.timeout)
		err = c.store.ReleaseSlot(ctx, s.key, &c.p, s.token)
		cancel()
	}
	if err != nil {
		// the slot comes back when its lease ends
		c.l.logFailure(context.Background(), &StoreError{Policy: c.p.Name, Mode: c.p.FailMode, Err: fmt.Errorf("releasing an in-flight slot (it frees when its lease ends): %w", err)}, Decision{Allowed: true})
	}
}

// inFlight tells the observer that a slot was taken (1) or given back (-1).
func (c *Concurrency) inFlight(delta int) {
	if o := c.l.observer; o != nil {
		o.Observe(Event{Kind: EventInFlight, Policy: c.p.Name, Keys: delta})
	}
}
