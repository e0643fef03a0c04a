package fleet

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
)

// breaker is a consecutive-failure circuit breaker. The request path reads
// one atomic word when closed.
type breaker struct {
	cfg   *config
	st    atomic.Uint32 // core.BreakerState
	fails atomic.Int64  // consecutive failures while closed

	mu       sync.Mutex
	openedAt time.Time
	probing  bool // half-open: the one probe call is out
}

func (b *breaker) init(cfg *config) { b.cfg = cfg }

func (b *breaker) state() core.BreakerState { return core.BreakerState(b.st.Load()) }

func (b *breaker) isOpen() bool { return b.state() != core.BreakerClosed }

// allow reports whether a request may call the remote store. Closed: yes.
// Open: no, until the cool-down has passed; then, when the remote has no
// Ping of its own (pingless), one request becomes the half-open probe.
// Half-open: no (the probe is out).
func (b *breaker) allow() bool {
	if b.st.Load() == uint32(core.BreakerClosed) {
		return true
	}
	if !b.cfg.pingless {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state() == core.BreakerOpen && !b.cfg.clock.Now().Before(b.openedAt.Add(b.cfg.coolDown)) {
		b.transition(core.BreakerHalfOpen)
		b.probing = true
		return true
	}
	return false
}

// success records a successful remote call: the breaker closes.
func (b *breaker) success() {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.st.Load() != uint32(core.BreakerClosed) {
		b.mu.Lock()
		if b.state() != core.BreakerClosed {
			b.probing = false
			b.transition(core.BreakerClosed)
		}
		b.mu.Unlock()
	}
}

// failure records a failed remote call: threshold consecutive ones open
// the breaker; a failed half-open probe opens it again.
func (b *breaker) failure() {
	n := b.fails.Add(1)
	st := b.state()
	if st == core.BreakerClosed && n < int64(b.cfg.threshold) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state() {
	case core.BreakerClosed:
		if b.fails.Load() >= int64(b.cfg.threshold) {
			b.openedAt = b.cfg.clock.Now()
			b.transition(core.BreakerOpen)
		}
	case core.BreakerHalfOpen:
		b.probing = false
		b.openedAt = b.cfg.clock.Now()
		b.transition(core.BreakerOpen)
	}
}

// coolingDown reports whether the breaker is open and its cool-down has
// not passed at now.
func (b *breaker) coolingDown(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state() == core.BreakerOpen && now.Before(b.openedAt.Add(b.cfg.coolDown))
}

// transition sets the state and reports it; b.mu is held.
func (b *breaker) transition(to core.BreakerState) {
	from := b.state()
	if from == to {
		return
	}
	b.st.Store(uint32(to))
	if to == core.BreakerClosed {
		b.fails.Store(0)
	}
	if o := b.cfg.observer; o != nil {
		o.Observe(core.Event{Kind: core.EventBreaker, From: from, To: to})
	}
}
