// Package schedlag measures the process's own scheduling latency: how
// late a goroutine that asked to wake every Tick actually woke. A process
// with more runnable goroutines than it has CPU (a busy host, a busy loop,
// GOMAXPROCS too low) wakes late; a remote store that is slow or stopped
// does not make it wake late. The limiter's stores use it to tell "the
// process could not run" from "the store did not answer" when a call
// misses its deadline (see the fleet tier's breaker and the Redis store's
// deadline).
//
// A [Probe] keeps the last [ring] late wake-ups (time and lateness) in
// atomics: its readers take no lock and allocate nothing. It is for the
// module's own packages; users do not import it.
package schedlag

import (
	"sync"
	"sync/atomic"
	"time"
)

// Tick is how often the probe asks to wake.
const Tick = 5 * time.Millisecond

// minLag is the least lateness a wake-up is recorded with (timer
// granularity and an idle runtime's own jitter stay below it).
const minLag = time.Millisecond

// ring is how many late wake-ups a Probe remembers: at one a tick, 1.28 s
// of a process late at every tick.
const ring = 256

// Probe is a scheduler-latency monitor. The zero Probe is not usable: use
// [New] (run its loop with [Probe.Run]) or [Shared]. Safe for concurrent
// use.
type Probe struct {
	base time.Time
	last atomic.Int64 // the loop's last wake-up, ns since base (0: not running)
	next atomic.Uint64
	// each slot: the wake-up's time in ms since base (upper 40 bits, 34
	// years; in µs they wrapped after 12.7 days of uptime) and its
	// lateness in µs (lower 24 bits, at most ~16.7 s)
	lags [ring]atomic.Uint64
	// peak is the longest lag recorded within the last Window, as of the
	// loop's last wake-up (Peak reads it in one load)
	peak atomic.Int64
	// touched is the last read (Shared's loop stops when nobody reads)
	touched atomic.Int64
	// since is when the loop started, ns since base (0: not running)
	since atomic.Int64
	// blind is set on a probe whose loop starts on demand (Shared's, or
	// NewOnDemand's): Move then treats the time before the loop has
	// watched for a Window as starved (see Move)
	blind bool
}

// Window is how far back Peak looks.
const Window = 500 * time.Millisecond

// New returns a Probe whose clock starts now; it measures nothing until
// Run runs.
func New() *Probe { return &Probe{base: time.Now()} }

// Now returns the probe's monotonic clock: nanoseconds since New.
func (p *Probe) Now() int64 { return int64(time.Since(p.base)) }

// Time returns the wall-clock time of ns on the probe's clock.
func (p *Probe) Time(ns int64) time.Time { return p.base.Add(time.Duration(ns)) }

// Run is the probe's loop: it wakes every Tick and records each wake-up
// later than minLag past its due time, until stop is closed.
func (p *Probe) Run(stop <-chan struct{}) { p.loop(stop, false) }

// loop is Run; with idleStop it also returns once nobody read the probe
// for idle (Shared's loop).
func (p *Probe) loop(stop <-chan struct{}, idleStop bool) {
	tk := time.NewTicker(Tick)
	defer tk.Stop()
	defer p.last.Store(0)
	defer p.since.Store(0)
	prev := p.Now()
	p.since.Store(max(prev, 1))
	p.last.Store(prev)
	checked := prev
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			now := p.Now()
			p.Record(now, time.Duration(now-prev)-Tick)
			prev = now
			p.last.Store(now)
			p.peak.Store(int64(p.lagSince(now - int64(Window))))
			if idleStop && time.Duration(now-checked) >= idle {
				checked = now
				if p.touched.Swap(0) == 0 {
					return
				}
			}
		}
	}
}

// Record notes a wake-up at at (ns on the probe's clock) that was lag
// late; lags under minLag are dropped. Run calls it; tests call it to
// inject a starved process.
func (p *Probe) Record(at int64, lag time.Duration) {
	if lag < minLag {
		return
	}
	us := min(lag.Microseconds(), 1<<24-1)
	i := p.next.Add(1) % ring
	p.lags[i].Store(uint64(max(at, 0)/1e6)<<24 | uint64(us))
}

// LagSince returns the longest the process waited to run since start (ns
// on the probe's clock): the latest of the wake-ups recorded at or after
// start (to the millisecond), and how overdue the loop's next wake-up is now (a process so
// starved that the loop has not run). Zero when the loop is not running
// and nothing was recorded.
func (p *Probe) LagSince(start int64) time.Duration {
	p.touch()
	return p.lagSince(start)
}

func (p *Probe) lagSince(start int64) time.Duration {
	var worst time.Duration
	now := p.Now()
	if last := p.last.Load(); last != 0 {
		worst = max(0, time.Duration(now-last)-Tick)
	}
	from := uint64(max(start, 0) / 1e6) // to the millisecond
	for i := range p.lags {
		v := p.lags[i].Load()
		if v>>24 >= from && v != 0 {
			worst = max(worst, time.Duration(v&(1<<24-1))*time.Microsecond)
		}
	}
	return worst
}

// Peak returns the longest the process waited to run within the last
// Window (as of the loop's last wake-up), or how overdue the loop's next
// wake-up is now if that is longer: one atomic load when the process is
// not starved. When the loop is not running (a Probe a test records
// lags in by hand), the longest recorded within the last Window.
func (p *Probe) Peak() time.Duration {
	p.touch()
	last := p.last.Load()
	if last == 0 {
		return p.lagSince(p.Now() - int64(Window))
	}
	return max(time.Duration(p.peak.Load()), time.Duration(p.Now()-last)-Tick)
}

// MaxMove is how many times the time left until it a deadline is moved
// later at most by [Probe.Move].
const MaxMove = 3

// Move returns a store deadline dl moved later by the process's recent
// wait to run (Peak), by at most MaxMove times the time left until dl:
// the rule by which the Redis store and the fleet tier keep a starved
// host from turning a store's healthy answers into timeouts. A zero or
// passed dl, or a process that did not wait, gets dl back.
//
// A probe whose loop starts on demand (Shared, NewOnDemand) cannot know
// the wait before its loop has watched for a Window (the first decisions
// of a process, or the first after an idle second): until then Move
// moves dl by the most, MaxMove times the time left, as for a process
// seen starved. A store that is slow or down then costs those first
// calls up to four deadlines instead of one; a starved process's first
// decisions are not failed for the time it could not run. A probe run
// by its owner (New and Run: the fleet tier's) has no such window.
func (p *Probe) Move(dl time.Time) time.Time {
	if dl.IsZero() {
		return dl
	}
	lag := p.Peak()
	left := time.Until(dl)
	if left <= 0 {
		return dl
	}
	if p.blind {
		if st := p.since.Load(); st == 0 || time.Duration(p.Now()-st) < Window {
			lag = MaxMove * left
		}
	}
	if lag <= 0 {
		return dl
	}
	return dl.Add(min(lag, MaxMove*left))
}

// NewOnDemand returns a Probe as Shared's (its loop started on demand,
// Move blind until the loop has watched for a Window), not shared and
// not started: start it with Run. For tests of the stores' deadlines.
func NewOnDemand() *Probe {
	p := New()
	p.blind = true
	return p
}

// touch notes a read (for Shared's idle stop).
func (p *Probe) touch() {
	if p.touched.Load() == 0 {
		p.touched.Store(1)
	}
}

// idle is how long Shared's loop runs with no reader before it stops.
const idle = time.Second

var shared struct {
	once    sync.Once
	p       *Probe
	mu      sync.Mutex
	running bool
}

// Shared returns the process's probe, starting its loop when it is not
// running. The loop stops by itself after idle (one to two seconds)
// without a read (LagSince, Peak), and Shared starts it again: a process that stops
// using the stores has no goroutine left behind. A call is an atomic load
// when the loop runs.
func Shared() *Probe {
	shared.once.Do(func() { shared.p = NewOnDemand() })
	p := shared.p
	if p.last.Load() == 0 {
		shared.mu.Lock()
		if !shared.running {
			shared.running = true
			go p.runShared()
		}
		shared.mu.Unlock()
	}
	return p
}

// runShared runs the loop until no reader read for idle.
func (p *Probe) runShared() {
	p.loop(nil, true)
	shared.mu.Lock()
	shared.running = false
	shared.mu.Unlock()
}
