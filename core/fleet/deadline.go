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
func (s *Store) TakeBy(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if deadline.IsZero() {
		return s.Take(ctx, key, p, now, cost)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithDeadline(ctx, s.health.Move(deadline))
	defer cancel()
	return s.Take(ctx, key, p, now, cost)
}

// MoveDeadline returns the store deadline dl moved as TakeBy moves its
// own (later by the process's recent wait to run, at most three times
// the time left): a core.Limiter gives the quota verbs (Peek,
// PeekDecision, Charge, Refund, Usage) this deadline. A zero dl is
// returned as is. Safe for concurrent use.
func (s *Store) MoveDeadline(dl time.Time) time.Time { return s.health.Move(dl) }
