package fleet

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
)

// Scheduler-latency monitor: a goroutine asks to wake every starveTick and
// records how late it woke. A process whose own goroutines wait longer
// than starveLag to run is starved (more runnable goroutines than cores, a
// busy loop, GOMAXPROCS too low): its remote calls miss their deadlines
// because the client's goroutines do not run, not because the store is
// down.
const (
	starveTick   = 5 * time.Millisecond
	starveLag    = 10 * time.Millisecond
	starveMemory = 500 * time.Millisecond // a lag counts this long after it was seen
	// starveGrace is how long a starved process's timeouts are forgiven
	// while its domain answers nothing at all: a store that is down in a
	// starved process still opens its breaker, this much later.
	starveGrace = 3 * time.Second
)

// starvation is the monitor's state, in nanoseconds of the monotonic
// clock since the tier's start (0: never).
type starvation struct {
	base   time.Time
	last   atomic.Int64 // the monitor's last wake-up
	lagged atomic.Int64 // the last wake-up later than starveLag
}

// since returns the monotonic nanoseconds since the tier's start.
func (s *starvation) since() int64 { return int64(time.Since(s.base)) }

// run is the monitor's loop; it stops when stop is closed.
func (s *starvation) run(stop <-chan struct{}) {
	tk := time.NewTicker(starveTick)
	defer tk.Stop()
	prev := s.since()
	s.last.Store(prev)
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			now := s.since()
			if time.Duration(now-prev) > starveTick+starveLag {
				s.lagged.Store(now)
			}
			prev = now
			s.last.Store(now)
		}
	}
}

// starved reports whether the process is starved now: the monitor woke
// late within the last starveMemory, or has not woken for longer than a
// tick plus starveLag.
func (s *starvation) starved() bool {
	now := s.since()
	if l := s.lagged.Load(); l != 0 && time.Duration(now-l) < starveMemory {
		return true
	}
	return time.Duration(now-s.last.Load()) > starveTick+starveLag
}

// outcome is what a remote call's error says about its failure domain.
type outcome uint8

const (
	// answered: the domain answered, with a decision or an error reply
	// (out of memory, a script error, CLUSTERDOWN, MOVED…): it is up.
	answered outcome = iota
	// outage: the domain did not answer (a connection failure, or a
	// timeout while the process was not starved).
	outage
	// unknown: the call says nothing about the domain (its caller
	// cancelled it; it timed out while the process was starved).
	unknown
)

// classify judges err, returned by a remote call made under ctx. This is
// the one place that decides which errors count towards a breaker:
// connection failures and timeouts only, by core.ClassifyError's kind.
// Every other kind — an error reply of the server, and any kind
// ClassifyError adds for one (OOM, TRYAGAIN, CLUSTERDOWN, MOVED) — means
// the domain answered; it is returned to the caller (the Limiter applies
// the fail mode to that request) and never opens a breaker.
func (s *Store) classify(ctx context.Context, b *breaker, err error) outcome {
	if err == nil {
		return answered
	}
	switch core.ClassifyError(err) {
	case core.ErrorConnection:
		return outage
	case core.ErrorTimeout:
		// A timeout while the process is starved is forgiven as long as
		// the domain answered some call within starveGrace.
		if !s.cfg.noForgive && s.health.starved() && time.Duration(s.health.since()-b.okAt.Load()) < starveGrace {
			return unknown
		}
		return outage
	case core.ErrorCanceled:
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return unknown // the caller cancelled its own request
		}
		return outage
	case core.ErrorCircuitOpen:
		return unknown
	}
	return answered
}

// report records a remote call's outcome with b and returns it.
func (s *Store) report(ctx context.Context, b *breaker, err error) outcome {
	o := s.classify(ctx, b, err)
	switch o {
	case answered:
		b.okAt.Store(s.health.since())
		if b.downAt.Load() != 0 {
			b.downAt.Store(0)
		}
		b.success()
	case outage:
		if b.downAt.Load() == 0 {
			b.downAt.CompareAndSwap(0, s.cfg.clock.Now().UnixNano())
		}
		b.failure()
	default:
		b.neutral()
	}
	return o
}
