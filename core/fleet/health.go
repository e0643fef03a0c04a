package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/limitkit/limitkit/core"
)

// A remote call that misses its deadline while the process itself could
// not run (more runnable goroutines than cores, a busy loop, GOMAXPROCS
// too low) says nothing about the store: its answer may have been in the
// socket when the client's goroutine ran again. The tier tells the two
// apart with a scheduler-latency probe (internal/schedlag: a goroutine
// that asks to wake every 5 ms and records how late it woke): a timeout
// is the process's fault only when, during that very call, the process
// waited to run at least half the time the call had (its deadline less
// its start; starveLag when it had no deadline). A busy process whose
// goroutines still ran within that has seen the store not answer: an
// outage, as on an idle host.
const (
	starveLag = 10 * time.Millisecond // the threshold of a call without a deadline
	// starveGrace is how long a starved process's timeouts are forgiven
	// while its domain answers nothing at all: a store that is down in a
	// starved process still opens its breaker, this much later.
	starveGrace = 3 * time.Second
)

// starvedDuring reports whether the process's own scheduling delay
// explains a call started at start (on the probe's clock) under ctx
// missing its deadline: the longest wait to run seen since start is at
// least half the call's budget.
func (s *fleetStore) starvedDuring(ctx context.Context, start int64) bool {
	need := starveLag
	if dl, ok := ctx.Deadline(); ok {
		need = dl.Sub(s.health.Time(start)) / 2
	}
	return s.health.LagSince(start) >= need
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

// classify judges err, returned by a remote call made under ctx that
// started at start (on the probe's clock: s.health.Now()). This is
// the one place that decides which errors count towards a breaker:
// connection failures and timeouts only, by core.ClassifyError's kind.
// Every other kind — an error reply of the server, and any kind
// ClassifyError adds for one (OOM, TRYAGAIN, CLUSTERDOWN, MOVED) — means
// the domain answered; it is returned to the caller (the Limiter applies
// the fail mode to that request) and never opens a breaker.
func (s *fleetStore) classify(ctx context.Context, b *breaker, err error, start int64) outcome {
	if err == nil {
		return answered
	}
	switch core.ClassifyError(err) {
	case "connection":
		return outage
	case "timeout":
		// A timeout that the process's own starvation explains is
		// forgiven as long as the domain answered some call within
		// starveGrace.
		if !s.cfg.noForgive && s.starvedDuring(ctx, start) && time.Duration(s.health.Now()-b.okAt.Load()) < starveGrace {
			return unknown
		}
		return outage
	case "canceled":
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return unknown // the caller cancelled its own request
		}
		return outage
	case "circuit_open":
		return unknown
	}
	return answered
}

// report records the outcome of a remote call started at start with b
// and returns it. The outages of one wave count once towards a closed
// breaker: a call that started before the last counted outage was seen
// was in flight with it, and its own timeout is the same stall seen
// again (four requests in flight when a busy host's redis-server stalls
// time out together; counted alone they passed the threshold of three
// and opened the breaker on one stall). A stopped Redis opens it after
// threshold waves: threshold store deadlines with concurrent callers, the
// threshold's calls for a serial one, as before.
func (s *fleetStore) report(ctx context.Context, b *breaker, err error, start int64) outcome {
	o := s.classify(ctx, b, err, start)
	switch o {
	case answered:
		b.okAt.Store(s.health.Now())
		if b.downAt.Load() != 0 {
			b.downAt.Store(0)
		}
		b.success()
	case outage:
		b.slow.Store(core.ClassifyError(err) == "timeout")
		if b.downAt.Load() == 0 {
			b.downAt.CompareAndSwap(0, s.cfg.clock.Now().UnixNano())
		}
		if b.state() == breakerClosed && !b.newWave(start, s.health.Now()) {
			break // in flight with an outage already counted: the same stall
		}
		b.failure()
	default:
		b.neutral()
	}
	return o
}
