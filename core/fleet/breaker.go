package fleet

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
)

// maxDomains bounds the per-domain breakers of one tier: a Cluster has at
// most a few hundred masters; past the bound, further domains share the
// tier's default breaker.
const maxDomains = 256

// domainIdle is how long a closed breaker goes unused before it is
// reclaimed (a master address that vanished after a failover).
const domainIdle = time.Minute

// breaker is a consecutive-failure circuit breaker for one failure domain.
// The request path reads one atomic word when closed.
type breaker struct {
	cfg   *config
	st    atomic.Uint32 // breakerState
	fails atomic.Int64  // consecutive failures while closed
	used  atomic.Bool   // called since the last sweep
	okAt  atomic.Int64  // the last answered call (starvation clock)
	// downAt is when (the tier's clock, UnixNano) the first outage since
	// the last answered call was reported; 0 while the domain answers (see
	// Store.flapping).
	downAt atomic.Int64

	mu      sync.Mutex
	retryAt time.Time // open: when the next half-open probe may go

	probe atomic.Pointer[ekey] // the last failed call's key: the background probe replays it

	// slow: the last outage was a timeout (the domain may be alive and
	// slow), not a connection failure; watching: a watch call is in
	// flight (see Store.watch)
	slow     atomic.Bool
	watching atomic.Bool
	// waveAt is when (the probe's clock, Store.health) the last outage
	// counted while closed was seen (see newWave)
	waveAt atomic.Int64
}

// newWave reports whether an outage of a call started at start, seen at
// now (the probe's clock), counts: the call started at or after the last
// counted outage was seen, which it then marks at now. Calls in flight
// together with a counted outage are one wave and count once.
func (b *breaker) newWave(start, now int64) bool {
	for {
		w := b.waveAt.Load()
		if start < w {
			return false
		}
		if b.waveAt.CompareAndSwap(w, now) {
			return true
		}
	}
}

func (b *breaker) state() breakerState { return breakerState(b.st.Load()) }

func (b *breaker) isOpen() bool { return b.state() != breakerClosed }

// allow reports whether a request may call the remote store. Closed: yes.
// Open: no, until the retry time has passed; then the request becomes the
// half-open probe: a real decision, whose outcome closes or reopens the
// breaker. When the background probe has a key to replay, a request
// probes only one probe interval after the retry time (the background
// probe, with its longer deadline, goes first). Half-open: no (the probe
// is out).
func (b *breaker) allow() bool {
	if b.st.Load() == uint32(breakerClosed) {
		return true
	}
	var wait time.Duration
	if b.probe.Load() != nil {
		wait = b.cfg.probe
	}
	return b.halfOpen(wait)
}

// halfOpen moves an open breaker to half-open, and reports it, when its
// retry time plus wait has passed.
func (b *breaker) halfOpen(wait time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state() == breakerOpen && !b.cfg.clock.Now().Before(b.retryAt.Add(wait)) {
		b.transition(breakerHalfOpen)
		return true
	}
	return false
}

// success records a call the remote store answered (a decision, or an
// error reply: the domain is up): the breaker closes.
func (b *breaker) success() {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.st.Load() != uint32(breakerClosed) {
		b.mu.Lock()
		b.transition(breakerClosed)
		b.mu.Unlock()
	}
}

// failure records an outage (see isOutage): threshold consecutive ones
// open the breaker for the cool-down; a failed half-open probe opens it
// again until the next probe, one probe interval later.
func (b *breaker) failure() {
	n := b.fails.Add(1)
	if b.state() == breakerClosed && n < int64(b.cfg.threshold) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state() {
	case breakerClosed:
		if b.fails.Load() >= int64(b.cfg.threshold) {
			b.retryAt = b.cfg.clock.Now().Add(b.cfg.coolDown)
			b.transition(breakerOpen)
		}
	case breakerHalfOpen:
		b.retryAt = b.cfg.clock.Now().Add(b.cfg.probe)
		b.transition(breakerOpen)
	}
}

// neutral records a call that says nothing about the domain (its caller
// cancelled it, or it timed out while the process itself was starved): a
// half-open probe is given back, and the next request after one probe
// interval probes again.
func (b *breaker) neutral() {
	if b.state() != breakerHalfOpen {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state() == breakerHalfOpen {
		b.retryAt = b.cfg.clock.Now().Add(b.cfg.probe)
		b.transition(breakerOpen)
	}
}

// transition sets the state and reports it; b.mu is held.
// breakerState is the state of a breaker. The zero value is
// breakerClosed.
type breakerState uint8

const (
	// breakerClosed: calls go to the remote store.
	breakerClosed breakerState = iota
	// breakerOpen: the remote store is not called; the fail mode decides.
	breakerOpen
	// breakerHalfOpen: one probe call is let through; its outcome closes
	// or reopens the breaker.
	breakerHalfOpen
)

// String returns "closed", "open" or "half_open": the state as
// core.EventBreaker's From and To, Store.BreakerState and the metrics
// name it.
func (s breakerState) String() string {
	switch s {
	case breakerClosed:
		return "closed"
	case breakerOpen:
		return "open"
	case breakerHalfOpen:
		return "half_open"
	}
	return "unknown"
}

func (b *breaker) transition(to breakerState) {
	from := b.state()
	if from == to {
		return
	}
	b.st.Store(uint32(to))
	if to == breakerClosed {
		b.fails.Store(0)
	}
	if to == breakerOpen && from == breakerClosed {
		b.cfg.openings.Add(1)
		if b.cfg.wake != nil {
			select { // the probe loop starts the watch at once
			case b.cfg.wake <- struct{}{}:
			default:
			}
		}
	}
	if o := b.cfg.observer; o != nil {
		o.Observe(core.Event{Kind: core.EventBreaker, From: from.String(), To: to.String()})
	}
}

// domains holds one breaker per failure domain of the remote store (a
// Cluster master; see storekit.DomainStore), created on first use, at most
// maxDomains of them; the domain "" (a single node, an unknown domain, and
// the overflow) has the default breaker.
type domains struct {
	cfg   *config
	def   breaker
	mu    sync.RWMutex
	m     map[string]*breaker
	swept time.Time
}

func (d *domains) init(cfg *config) {
	d.cfg = cfg
	d.def.cfg = cfg
	d.m = make(map[string]*breaker)
}

// get returns the breaker of domain name.
func (d *domains) get(name string) *breaker {
	if name == "" {
		return &d.def
	}
	d.mu.RLock()
	b := d.m[name]
	d.mu.RUnlock()
	if b == nil {
		d.mu.Lock()
		if b = d.m[name]; b == nil {
			if len(d.m) >= maxDomains {
				d.mu.Unlock()
				return &d.def
			}
			b = &breaker{cfg: d.cfg}
			d.m[name] = b
		}
		d.mu.Unlock()
	}
	if !b.used.Load() {
		b.used.Store(true)
	}
	return b
}

// sweep reclaims, at most once per domainIdle, the closed breakers not
// used since the previous sweep: the domains of masters that went away.
func (d *domains) sweep(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Sub(d.swept) < domainIdle {
		return
	}
	d.swept = now
	for name, b := range d.m {
		if !b.used.Swap(false) && !b.isOpen() {
			delete(d.m, name)
		}
	}
}

// worst returns the most open state over every domain: open if one is
// open, else half-open if one is, else closed.
func (d *domains) worst() breakerState {
	st := d.def.state()
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, b := range d.m {
		switch s := b.state(); {
		case s == breakerOpen:
			return s
		case s == breakerHalfOpen:
			st = s
		}
	}
	return st
}

// open returns the breakers that are open.
func (d *domains) open() []*breaker {
	var out []*breaker
	if d.def.isOpen() {
		out = append(out, &d.def)
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, b := range d.m {
		if b.isOpen() {
			out = append(out, b)
		}
	}
	return out
}

// states returns each known domain's state ("" for the default breaker).
func (d *domains) states() map[string]breakerState {
	d.mu.RLock()
	defer d.mu.RUnlock()
	m := make(map[string]breakerState, len(d.m)+1)
	m[""] = d.def.state()
	for name, b := range d.m {
		m[name] = b.state()
	}
	return m
}
