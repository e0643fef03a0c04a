package core

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time. Limiters and stores that own time take a Clock by
// option so tests can drive time by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the system clock, read the cheap way: the wall clock is
// read once and anchored to the monotonic clock, and Now adds the
// monotonic time elapsed since the anchor (one vDSO call, where time.Now
// makes two). The anchor is renewed from time.Now every second.
//
// What a wall-clock step does (NTP stepping the clock, an operator setting
// it): Now keeps counting from the old anchor until the next renewal, so
// the step shows up within a second, at once and whole, as it would
// with time.Now. A slew (NTP's gradual adjustment) is followed within the
// same delay. Times returned by Now carry a monotonic reading, so
// durations between them (time.Since, Sub) are monotonic as with time.Now.
// Stores tolerate a clock that goes back (see the algorithms' docs).
//
// The zero value is ready to use and safe for concurrent use.
type SystemClock struct{}

// reanchorEvery is how often [SystemClock] reads the wall clock again.
const reanchorEvery = time.Second

type clockAnchor struct{ t time.Time }

var sysAnchor atomic.Pointer[clockAnchor]

func init() { sysAnchor.Store(&clockAnchor{t: time.Now()}) }

// Now returns the current time: the anchor plus the monotonic time since.
func (SystemClock) Now() time.Time {
	a := sysAnchor.Load()
	d := time.Since(a.t) // monotonic only: a.t has a monotonic reading
	if d >= 0 && d < reanchorEvery {
		return a.t.Add(d)
	}
	t := time.Now()
	sysAnchor.Store(&clockAnchor{t: t})
	return t
}

// coarseClock is the system clock as of the last tick of a shared
// background ticker that runs every millisecond while the clock is read:
// Now is two loads, where [SystemClock] makes a vDSO call (25–35 ns on a
// virtual machine, as much as the rest of an embedded decision). It is
// the default clock of a [Limiter]. The ticker starts at the first Now,
// which returns the ticker's first reading of [SystemClock], and stops
// after 100 ms without a Now; the first Now after that starts it
// again.
//
// Accuracy: Now lags SystemClock by at most coarseEvery plus the time the
// ticker waits for a CPU (on a saturated machine, longer). Every reader
// sees the same sequence of ticks, so times go back only when
// SystemClock's do (a wall-clock step). Decisions are those of the exact
// algorithms at an instant up to the lag earlier, so they
// are stricter by that much (a refill or a window boundary is seen up to
// the lag late), and over any interval a key can be admitted at most
// lag × rate more than its limit (under 1 request at 1,000 per second or
// less). Retry-After and reset times carry the same lag. Use SystemClock
// where a decision must use the exact instant.
//
// The zero value is ready to use and safe for concurrent use. The ticker
// costs one goroutine wake-up per coarseEvery while in use and nothing when
// idle.
type coarseClock struct{}

const (
	// coarseEvery is how often coarseClock's time advances while in use.
	coarseEvery = time.Millisecond
	// coarseIdle is how long coarseClock's ticker runs without a reader:
	// short, so that a goroutine-leak check after the last decision (goleak
	// retries for about 0.4 s) finds it gone; a restart costs one
	// SystemClock read and one goroutine start.
	coarseIdle = 100 * time.Millisecond
)

// coarseTime is one tick: its time, and whether a reader has seen it.
type coarseTime struct {
	t    time.Time
	read atomic.Bool
}

// coarseStopped is the tick of a stopped clock; its read flag stays
// false, so every Now takes the slow path, which starts the clock.
var coarseStopped = new(coarseTime)

// coarse is the state behind coarseClock.
var coarse struct {
	now     atomic.Pointer[coarseTime] // the last tick, or coarseStopped
	running atomic.Bool                // a ticker goroutine owns now
	idle    int                        // ticks without a reader (ticker only)
}

func init() { coarse.now.Store(coarseStopped) }

// Now returns the time of the last tick.
func (coarseClock) Now() time.Time {
	if p := coarse.now.Load(); p.read.Load() {
		return p.t // two loads and a copy (not inlined: Limiter.decide writes this out)
	}
	return coarseNow()
}

// coarseNow is Now's slow path: the first read of a tick marks it read
// (once per tick, so the line stays shared), and a stopped clock starts.
func coarseNow() time.Time {
	p := coarse.now.Load()
	if p != coarseStopped {
		p.read.Store(true)
		return p.t
	}
	return coarseStart()
}

// coarseStart starts the clock and returns its first tick. When another
// goroutine is starting it (or the ticker is stopping), it waits for that
// to finish rather than return a reading of its own, which could be later
// than the tick the other goroutine is about to publish: readers would
// then see time go back.
func coarseStart() time.Time {
	for {
		if p := coarse.now.Load(); p != coarseStopped {
			p.read.Store(true)
			return p.t
		}
		if coarse.running.CompareAndSwap(false, true) {
			coarse.idle = 0
			p := &coarseTime{t: SystemClock{}.Now()}
			p.read.Store(true)
			coarse.now.Store(p)
			coarseGo()
			return p.t
		}
		runtime.Gosched() // a start or a stop is under way: it takes no time
	}
}

// coarseGo starts the ticker goroutine (tests drive coarseTick instead).
var coarseGo = func() { go coarseTicker() }

func coarseTicker() {
	tk := time.NewTicker(coarseEvery)
	defer tk.Stop()
	for range tk.C {
		if !coarseTick(SystemClock{}.Now()) {
			return
		}
	}
}

// coarseTick publishes t as the current time, or, after coarseIdle
// without a reader, stops the clock and reports false. A new coarseTime
// per tick (not a reused buffer): a reader descheduled between loading the
// pointer and copying the time still reads a whole time.
func coarseTick(t time.Time) bool {
	if coarse.now.Load().read.Load() {
		coarse.idle = 0
	} else if coarse.idle++; time.Duration(coarse.idle)*coarseEvery >= coarseIdle {
		coarse.now.Store(coarseStopped)
		coarse.running.Store(false) // after now is stopped: a restart publishes anew
		return false
	}
	coarse.now.Store(&coarseTime{t: t})
	return true
}

// ManualClock is a Clock that only moves when told to; for tests. The zero
// value reads as the zero time; use [NewManualClock]. Safe for concurrent
// use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock frozen at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (which may be negative).
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
