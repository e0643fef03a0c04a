package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// verbDeadlines is a VerbStore recording the deadline its Peek is given;
// verbDeadlinesMoved also moves deadlines for a starved process, as the
// Redis store and the fleet tier do (MoveDeadline: here by a fixed wait).
type verbDeadlines struct{ dl time.Time }

func (s *verbDeadlines) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{Allowed: true}, nil
}

func (s *verbDeadlines) Peek(ctx context.Context, _ string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	s.dl, _ = ctx.Deadline()
	return core.Decision{Allowed: true, Remaining: 1, Limit: p.Limits[0]}, nil
}

func (s *verbDeadlines) Reset(context.Context, string, *core.Policy) error { return nil }

func (s *verbDeadlines) Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.Peek(ctx, key, p, now, cost)
}

func (s *verbDeadlines) Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.Peek(ctx, key, p, now, cost)
}

type verbDeadlinesMoved struct {
	verbDeadlines
	wait time.Duration
}

func (s *verbDeadlinesMoved) MoveDeadline(dl time.Time) time.Time { return dl.Add(s.wait) }

// TestStarvedProcessMovesTheVerbsDeadline (issue 37: a starved host is
// not a dead store): on a store that moves its decisions' deadline for a
// starved process (the Redis store, the fleet tier: MoveDeadline), a
// verb's store deadline (a PeekDecision, the check of a rule counted by
// outcome) moves the same way; on another remote store it stays the
// Limiter's timeout. The bounds are taken before and after the call, so
// the host's load cannot break them.
func TestStarvedProcessMovesTheVerbsDeadline(t *testing.T) {
	const timeout = 2 * time.Second
	pol := core.Policy{Name: "v", Limits: []core.Limit{core.PerMinute(10)}}
	ctx := context.Background()

	moved := &verbDeadlinesMoved{wait: 1500 * time.Millisecond}
	l := core.MustNewLimiter(moved, pol, core.WithTimeout(timeout))
	t0 := time.Now()
	_, err := l.PeekDecision(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, moved.dl.Before(t0.Add(timeout+moved.wait)), "moved by the store's 1.5 s: %v after the call's start", moved.dl.Sub(t0))

	plain := &verbDeadlines{}
	l = core.MustNewLimiter(plain, pol, core.WithTimeout(timeout))
	_, err = l.PeekDecision(ctx, "k", 1)
	t1 := time.Now()
	require.NoError(t, err)
	assert.False(t, plain.dl.After(t1.Add(timeout)), "a store that moves nothing: the timeout alone, %v after the call's end", plain.dl.Sub(t1))
}
