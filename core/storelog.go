package core

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// defaultLogInterval is the least time between two store-failure lines of
// one Limiter unless [WithLogInterval] says otherwise.
const defaultLogInterval = 10 * time.Second

// storeLog rate-limits a Limiter's store-failure lines: the first failure
// is logged at once, later ones at most once per interval, each line with
// the count of failures since the previous one. Two atomics, touched only
// on the failure path.
type storeLog struct {
	logger   *slog.Logger
	set      bool // WithLogger was given (logger nil then means silent)
	interval time.Duration
	next     atomic.Int64 // unix ns before which no line is written, once started
	started  atomic.Bool  // a line was written (the first failure always is)
	failures atomic.Int64 // failures not yet reported in a line
}

// logFailure counts a store failure and writes a line when the interval
// has passed since the previous one. Only one of the goroutines that find
// it due wins the compare-and-swap and writes.
func (l *Limiter) logFailure(ctx context.Context, se *StoreError, d Decision) {
	sl := &l.log
	logger := sl.logger
	if !sl.set {
		logger = slog.Default()
	}
	if logger == nil {
		return
	}
	if errors.Is(se.Err, ErrCallerDone) {
		// the caller's own cancellation or deadline: not a store failure
		if logger.Enabled(ctx, slog.LevelDebug) {
			logger.LogAttrs(ctx, slog.LevelDebug, "limitkit: the caller gave up before the store answered; "+effect(se.Mode, d),
				slog.String("policy", se.Policy),
				slog.String("fail_mode", se.Mode.String()),
				slog.String("kind", kindCanceled.String()),
				slog.String("err", se.Err.Error()),
			)
		}
		return
	}
	sl.failures.Add(1)
	now := l.clock.Now().UnixNano()
	next := sl.next.Load()
	due := now + int64(sl.interval)
	if due < now {
		due = math.MaxInt64 // an interval of centuries: saturate
	}
	if sl.started.Load() && now < next || !sl.next.CompareAndSwap(next, due) {
		return
	}
	sl.started.Store(true)
	if !logger.Enabled(ctx, slog.LevelError) {
		return
	}
	n := sl.failures.Swap(0)
	kind := classify(se.Err)
	logger.LogAttrs(ctx, slog.LevelError, "limitkit: store failed; "+effect(se.Mode, d),
		slog.String("policy", se.Policy),
		slog.String("fail_mode", se.Mode.String()),
		slog.String("kind", kind.String()),
		slog.Int64("failures", n),
		slog.Duration("interval", sl.interval),
		slog.String("err", se.Err.Error()),
		slog.String("hint", hint(kind)),
	)
}

// effect says what the fail mode did to the request that failed.
func effect(m FailMode, d Decision) string {
	switch {
	case m == FailLocal && d.Degraded && d.Limit.Requests > 0:
		return "requests decided by the local fallback (fail mode local)"
	case d.Allowed:
		return "requests admitted without limiting (fail mode " + m.String() + ")"
	}
	return "requests denied (fail mode " + m.String() + ")"
}

// hint says what to look at for an error of kind k.
func hint(k errorKind) string {
	switch k {
	case kindConnection:
		return "the store is unreachable (refused, reset or unknown host): check that it is running and that the address is right"
	case kindTimeout:
		return "the store did not answer within the deadline: it is down, overloaded or too far; check its latency, or raise core.WithTimeout"
	case kindCircuitOpen:
		return "the circuit breaker is open after repeated failures; the lines before this one name the cause"
	case kindCanceled:
		return "the caller cancelled the request (the client went away) before the store answered; not a store fault unless it comes with slow store calls"
	}
	return replyHint(k)
}
