package core

import (
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
// makes two). The anchor is renewed from time.Now every [ReanchorEvery].
//
// What a wall-clock step does (NTP stepping the clock, an operator setting
// it): Now keeps counting from the old anchor until the next renewal, so
// the step shows up within ReanchorEvery, at once and whole, as it would
// with time.Now. A slew (NTP's gradual adjustment) is followed within the
// same delay. Times returned by Now carry a monotonic reading, so
// durations between them (time.Since, Sub) are monotonic as with time.Now.
// Stores tolerate a clock that goes back (see the algorithms' docs).
//
// The zero value is ready to use and safe for concurrent use.
type SystemClock struct{}

// ReanchorEvery is how often [SystemClock] reads the wall clock again.
const ReanchorEvery = time.Second

type clockAnchor struct{ t time.Time }

var sysAnchor atomic.Pointer[clockAnchor]

func init() { sysAnchor.Store(&clockAnchor{t: time.Now()}) }

// Now returns the current time: the anchor plus the monotonic time since.
func (SystemClock) Now() time.Time {
	a := sysAnchor.Load()
	d := time.Since(a.t) // monotonic only: a.t has a monotonic reading
	if d >= 0 && d < ReanchorEvery {
		return a.t.Add(d)
	}
	t := time.Now()
	sysAnchor.Store(&clockAnchor{t: t})
	return t
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

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
