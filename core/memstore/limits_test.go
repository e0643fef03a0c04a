package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestPeekLimits (issue 37, the admin GET's per_limit): each limit of a
// two-limit GCRA policy read alone from its part of the key's state,
// consuming nothing: after 3 requests, 3 a minute is spent (the next in
// 20 s) and 5 an hour has 2 left (full again in 36 minutes).
func TestPeekLimits(t *testing.T) {
	s := mustNew()
	defer s.Close()
	p := &core.Policy{Name: "two", Limits: []core.Limit{core.PerMinute(3), core.Per(5, time.Hour)}}
	now := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	for range 3 {
		d, err := s.Take(ctx, "k", p, now, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	for range 2 { // twice: the read consumes nothing
		ds, err := s.PeekLimits(ctx, "k", p, now)
		require.NoError(t, err)
		require.Len(t, ds, 2)
		assert.Equal(t, core.Decision{Allowed: false, Limit: p.Limits[0], Remaining: 0, ResetAfter: time.Minute, RetryAfter: 20 * time.Second, Policy: "two"}, ds[0])
		assert.Equal(t, core.Decision{Allowed: true, Limit: p.Limits[1], Remaining: 2, ResetAfter: 36 * time.Minute, Policy: "two"}, ds[1])
	}
}
