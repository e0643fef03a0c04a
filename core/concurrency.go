package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLease is the lease of a [ConcurrencyPolicy] that sets none.
const DefaultLease = 30 * time.Second

// maxLease bounds ConcurrencyPolicy.Lease: a crashed holder's slot comes
// back within the lease, so a longer one is a misconfiguration.
const maxLease = 24 * time.Hour

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
	// 1 s .. 24 h: NewConcurrency refuses a lease outside.
	Lease time.Duration
	// FailMode is what Acquire decides when the store fails: FailOpen
	// (the default) admits holding nothing, FailClosed denies. FailLocal
	// is not supported (an error at construction).
	FailMode FailMode
}

// slotStore is a store that can hold in-flight slots: it can back a
// [Concurrency] (memstore, redisstore, and the fleet tier when its remote
// store does; storekit.SlotStore documents the contract).
type slotStore interface {
	Store
	AcquireSlot(ctx context.Context, key string, p *ConcurrencyPolicy, token uint64, now time.Time) (held int64, ok bool, err error)
	ReleaseSlot(ctx context.Context, key string, p *ConcurrencyPolicy, token uint64) error
}

// countedSlotStore is a storekit.SlotStore of this process (memstore) that also
// holds plain counted slots: no token, no lease, no renewal. A process's
// slots go away with its memory, so a lease there guards against nothing
// but a release the code never calls. A [Concurrency] over such a store
// takes counted slots only.
type countedSlotStore interface {
	slotStore
	// CountedSlots returns the taker of p's counted slots, which
	// NewConcurrency calls once. The taker drops key's expired leased
	// holders (expiry <= now), then, if fewer than p.Max slots are held
	// (counted and leased together), adds one to key's counter (ok true)
	// and returns the counter; else it changes nothing (ok false, n nil).
	// held is the number of slots held after the call. The caller gives
	// the slot back with exactly one n.Add(-1), from any goroutine and
	// without the store: the store keeps n (and counts it) while it is
	// above zero, and increments it only under the lock it checks p.Max
	// under, so that a concurrent release can only make room. The error is
	// [ErrClosed] once the store is closed.
	CountedSlots(p *ConcurrencyPolicy) func(key string, now time.Time) (n *atomic.Int64, held int64, ok bool, err error)
}

// Concurrency limits how many requests of one key are in flight at once
// (see [ConcurrencyPolicy]). Build it with [NewConcurrency]; the zero
// value is not usable. Safe for concurrent use.
//
// Embedded store (memstore): a slot is a plain count of the key, taken
// under one lock of the key's shard and given back by one atomic
// decrement; it has no token, no lease and no renewal, as the process's
// memory, which holds the count, goes away with its holders. Lease only
// sets the decision's Limit.Window and caps RetryAfter there. A slot
// whose Release is never called stays held until the store is dropped:
// defer Release (the middleware does).
//
// Remote stores (redisstore, the fleet tier over it): a slot is a random
// 64-bit token with a lease. While any slot is held, one timer per
// Concurrency renews every held slot each Lease/3 (one AcquireSlot per
// slot); the timer is not re-armed once no slot is held, so an idle
// Concurrency holds no timer and no goroutine. A renewal that fails
// (store down, or the slot expired and was taken meanwhile) is retried at
// the next tick; the holder keeps running. Once the store is closed
// ([ErrClosed]) the renewals stop, with one logged failure, and the held
// slots are released as usual.
//
// RetryAfter of a denial: the mean time the slots of this Concurrency
// were held (an exponentially weighted mean over released slots, weight
// 1/8, measured on its clock), rounded up to a whole second, at least 1 s
// and at most the lease; 1 s before any slot was released. It is a
// hint, not a promise: a slot frees when a holder finishes.
type Concurrency struct {
	store   slotStore
	counted func(key string, now time.Time) (*atomic.Int64, int64, bool, error) // the store's counted slots, if it holds them
	p       ConcurrencyPolicy
	l       Limiter // the options (clock, timeout, logger); decides nothing
	local   bool
	limit   Limit
	mu      sync.Mutex
	held    slot // sentinel of the ring of held leased slots, under mu
	renewOn bool // the renewal timer is armed
	every   time.Duration
	_       [64]byte     // releases write meanUS: keep it off the lines Acquire reads
	meanUS  atomic.Int64 // mean hold time in µs; 0: none observed
	_       [56]byte
}

// slot is one held slot: a counted one (n set; pooled, reused once
// released) or a leased one (n nil; in the renewal ring until released,
// never reused). gen tells a Slot whether it is still this slot's holder.
type slot struct {
	gen   atomic.Uint64 // bumped by the release; a Slot of another gen is stale
	c     *Concurrency
	n     *atomic.Int64 // counted: the key's count in the store
	key   string        // leased: the store key and token
	token uint64
	at    time.Time
	prev  *slot // leased: the ring of held slots, under c.mu
	next  *slot
}

// countedSlots recycles the counted slots' handles: a counted Acquire
// allocates nothing.
var countedSlots = sync.Pool{New: func() any { return new(slot) }}

// Slot is an in-flight slot that [Concurrency.Acquire] took, or none (the
// zero Slot: a denial, or a store failure under fail-open). It is a small
// value: copy it, store it, pass it to another goroutine.
type Slot struct {
	h   *slot
	gen uint64
}

// Release gives the slot back: call it once the work is done (defer it).
// It is idempotent over the Slot and all its copies (the first call of
// any of them releases; later ones, and calls on the zero Slot, do
// nothing) and safe to call from any goroutine, also concurrently. It
// never blocks on the embedded store; on a remote store it makes one
// store call bounded by the Concurrency's timeout, and a failure is
// logged (the slot then frees when its lease ends).
func (s Slot) Release() {
	h := s.h
	if h == nil || !h.gen.CompareAndSwap(s.gen, s.gen+1) {
		return
	}
	c, at := h.c, h.at
	if n := h.n; n != nil {
		n.Add(-1)
		countedSlots.Put(h) // h is another holder's from here on
	} else {
		c.releaseLeased(h)
	}
	c.inFlight(-1)
	c.observeHold(at)
}

// NewConcurrency validates p and returns a Concurrency over store, which
// must implement storekit.SlotStore. It takes the Limiter options WithClock,
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
	ss, ok := store.(slotStore)
	if !ok {
		return nil, fmt.Errorf("core: concurrency limit %q: the store %T cannot hold in-flight slots (it does not implement storekit.SlotStore); use memstore, redisstore, or the fleet tier over redisstore", p.Name, store)
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
	if p.Lease < time.Second || p.Lease > maxLease {
		return nil, fmt.Errorf("core: concurrency limit %q: lease %v must be between 1s and %v", p.Name, p.Lease, maxLease)
	}
	switch p.FailMode {
	case FailOpen, FailClosed:
	default:
		return nil, fmt.Errorf("core: concurrency limit %q: fail mode %s is not supported; use open or closed", p.Name, p.FailMode)
	}
	c := &Concurrency{store: ss, p: p, every: p.Lease / 3}
	c.held.prev, c.held.next = &c.held, &c.held
	c.l = Limiter{clock: coarseClock{}, timeout: DefaultTimeout}
	c.l.log.interval = defaultLogInterval
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
	if ls, ok := store.(localStore); ok && ls.Local() {
		c.local = true
	}
	if cs, ok := store.(countedSlotStore); ok {
		c.counted = cs.CountedSlots(&c.p)
	}
	c.limit = Limit{Requests: p.Max, Window: p.Lease}
	return c, nil
}

// Policy returns the limit (with its Lease filled in). Do not modify it.
func (c *Concurrency) Policy() *ConcurrencyPolicy { return &c.p }

// Acquire takes a slot of key. On admission it returns the held [Slot]:
// call its Release once the work is done (defer it). On denial, and when
// the store failed, the Slot is the zero Slot (its Release does nothing)
// and nothing is held. On the embedded store it allocates nothing.
//
// The Decision: Allowed, Limit {Max, Lease}, Remaining the slots still
// free after this one; on denial Remaining 0 and RetryAfter (and
// ResetAfter) as described on [Concurrency]. When the store fails, the
// decision follows the FailMode (Degraded set; FailClosed waits 1 s) and
// the error is a *[StoreError]; the decision then has no Limit, as a
// [Limiter]'s under a fail mode.
func (c *Concurrency) Acquire(ctx context.Context, key string) (s Slot, d Decision, err error) {
	now := c.l.clock.Now()
	if c.counted != nil {
		n, held, ok, err := c.counted(key, now)
		if err != nil {
			d, err = c.l.settle(ctx, Decision{}, err)
			return Slot{}, d, err
		}
		if c.decide(&d, ok, held); !ok {
			return Slot{}, d, nil
		}
		h := countedSlots.Get().(*slot)
		h.c, h.n, h.at = c, n, now
		c.inFlight(1)
		return Slot{h: h, gen: h.gen.Load()}, d, nil
	}
	token := rand.Uint64()
	held, ok, err := c.acquire(ctx, key, token, now)
	if err != nil {
		d, err = c.l.settle(ctx, Decision{}, err)
		return Slot{}, d, err
	}
	if c.decide(&d, ok, held); !ok {
		return Slot{}, d, nil
	}
	h := &slot{c: c, key: key, token: token, at: now}
	c.hold(h)
	return Slot{h: h}, d, nil
}

// decide writes Acquire's decision when the store answered into *d.
func (c *Concurrency) decide(d *Decision, ok bool, held int64) {
	*d = Decision{Allowed: ok, Limit: c.limit, Policy: c.p.Name}
	if !ok {
		d.RetryAfter = c.retryAfter()
		d.ResetAfter = d.RetryAfter
		return
	}
	d.Remaining = max(c.p.Max-held, 0)
}

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

// hold records the leased slot s for renewal, arming the timer if none
// is.
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
// leaves the timer armed then). A closed store disarms the timer: renew
// reports false.
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
		if s.gen.Load() != 0 {
			continue // released meanwhile
		}
		now := c.l.clock.Now()
		_, _, err := c.acquire(context.Background(), s.key, s.token, now)
		if errors.Is(err, ErrClosed) {
			// A closed store never renews again: stop the timer (the
			// slots stay in the ring for their holders' Release) rather
			// than call it and log every Lease/3 for as long as they
			// are held.
			c.mu.Lock()
			c.renewOn = false
			c.mu.Unlock()
			c.l.logFailure(context.Background(), &StoreError{Policy: c.p.Name, Mode: c.p.FailMode, Err: fmt.Errorf("in-flight slots are no longer renewed: %w", err)}, Decision{Allowed: true})
			return false
		}
		if err != nil {
			c.l.logFailure(context.Background(), &StoreError{Policy: c.p.Name, Mode: c.p.FailMode, Err: fmt.Errorf("renewing an in-flight slot: %w", err)}, Decision{Allowed: true})
		}
	}
	return len(slots) > 0
}

// releaseLeased takes the leased slot s out of the renewal ring and
// removes its token from the store.
func (c *Concurrency) releaseLeased(s *slot) {
	c.mu.Lock()
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	c.mu.Unlock()
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

// observeHold folds the hold time of a slot taken at into the mean. A
// mean it does not change is not written, so that releases on many cores
// share its cache line.
func (c *Concurrency) observeHold(at time.Time) {
	hold := c.l.clock.Now().Sub(at).Microseconds()
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
		if next == old || c.meanUS.CompareAndSwap(old, next) {
			return
		}
	}
}

// inFlight tells the observer that a slot was taken (1) or given back (-1).
func (c *Concurrency) inFlight(delta int) {
	if o := c.l.observer; o != nil {
		o.Observe(Event{Kind: EventInFlight, Policy: c.p.Name, Keys: delta})
	}
}
