package fleet

import (
	"context"
	"time"

	"github.com/limitkit/limitkit/core"
)

// TakeBy is Take bounded by deadline as well as by ctx (a zero deadline
// is none): a core.Limiter gives the
// tier its store deadline this way. As the Redis store's TakeBy does,
// the tier moves deadline (the Limiter's, not ctx's, which is the
// caller's own) later by the longest the process's goroutines waited to
// run in the last 500 ms, by at most three times its own length (200 ms
// in all for core.DefaultTimeout's 50 ms): a starved host is not a dead
// store, and the time the process could not run does not count against
// the remote store. On a host with CPU to spare nothing changes.
//
// The deadline bounds only what waits: the remote call, or waiting for
// another request's lease. A decision from the deny cache or from a lease
// is answered without building a context (no timer, no allocation).
func (s *fleetStore) TakeBy(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return s.take(ctx, deadline, key, p, now, cost)
}

// bound is ctx with the deadline TakeBy was given, moved by the process's
// recent wait to run (a zero deadline: ctx as it is).
func (s *fleetStore) bound(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, s.health.Move(deadline))
}

// MoveDeadline returns the store deadline dl moved as TakeBy moves its
// own (later by the process's recent wait to run, at most three times
// the time left): a core.Limiter gives the quota verbs (Peek,
// PeekDecision, Charge, Refund, Usage) this deadline. A zero dl is
// returned as is. Safe for concurrent use.
func (s *fleetStore) MoveDeadline(dl time.Time) time.Time { return s.health.Move(dl) }
