package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestPeekLimits (issue 37, the admin GET's per_limit): each limit of a
// two-limit policy read alone from its own key, consuming nothing, as
// the embedded store reads it: after 3 requests, 3 a minute is spent
// (the next in 20 s under GCRA, 60 s under the log) and 5 an hour has 2
// left.
func TestPeekLimits(t *testing.T) {
	s := newStore(t, redistest.StartNode(t).NewClient(t), WithClientTime())
	now := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	for _, c := range []struct {
		algo   core.Algorithm
		retry  time.Duration
		reset2 time.Duration
	}{{core.GCRA, 20 * time.Second, 36 * time.Minute}, {core.SlidingWindowLog, time.Minute, time.Hour}} {
		p := mustPolicy(t, core.Policy{Name: "two-" + c.algo.String(), Algorithm: c.algo, Limits: []core.Limit{core.PerMinute(3), core.Per(5, time.Hour)}})
		for range 3 {
			d, err := s.Take(ctx, "k", p, now, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		for range 2 { // twice: the read consumes nothing
			ds, err := s.PeekLimits(ctx, "k", p, now)
			require.NoError(t, err)
			require.Len(t, ds, 2)
			assert.Equal(t, core.Decision{Allowed: false, Limit: p.Limits[0], Remaining: 0, ResetAfter: time.Minute, RetryAfter: c.retry, Policy: p.Name}, ds[0], c.algo)
			assert.Equal(t, core.Decision{Allowed: true, Limit: p.Limits[1], Remaining: 2, ResetAfter: c.reset2, Policy: p.Name}, ds[1], c.algo)
		}
	}
	_, err := s.PeekLimits(ctx, "k", nil, now)
	assert.Error(t, err, "a nil policy")
}
