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

// TestCalendarServerClock (issue 36): on the Redis server's clock (the
// default), a calendar day in Berlin admits its limit, the denial's
// RetryAfter is the time from the server's now to the next Berlin
// midnight, the key expires at that boundary (PEXPIRETIME, plus the TTL
// pad), and a caller whose clock is more than a period from the
// server's gets an error instead of a decision in the wrong period.
func TestCalendarServerClock(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	srv := redistest.StartNode(t)
	client := srv.NewClient(t)
	s := newStore(t, client)
	p := core.Policy{Name: "cal-srv", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(3, core.CalendarDay, berlin)}}
	ctx := context.Background()
	midnight := func(t time.Time) time.Time {
		y, m, d := t.In(berlin).Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, berlin)
	}
	for {
		before := time.Now()
		var last core.Decision
		for range 4 {
			last, err = s.Take(ctx, "alice", &p, time.Now(), 1)
			require.NoError(t, err)
		}
		after := time.Now()
		next := midnight(before)
		if !midnight(after).Equal(next) {
			require.NoError(t, client.FlushAll(ctx).Err()) // ran across midnight: again
			continue
		}
		require.False(t, last.Allowed, "the fourth of 3 per day")
		assert.GreaterOrEqual(t, last.RetryAfter, next.Sub(after)-time.Millisecond)
		assert.LessOrEqual(t, last.RetryAfter, next.Sub(before)+time.Millisecond)
		c, err := s.policy(&p)
		require.NoError(t, err)
		keys := s.keys(c, "alice")
		exp, err := client.PExpireTime(ctx, keys[0]).Result()
		require.NoError(t, err)
		at := time.UnixMilli(int64(exp / time.Millisecond))
		assert.False(t, at.Before(next), "the key expires at the boundary %v, not before: %v", next, at)
		assert.LessOrEqual(t, at.Sub(next), time.Duration(s.ttlPad+2)*time.Millisecond)
		break
	}

	// a caller three days behind the server: its periods do not hold the
	// server's now
	_, err = s.Take(ctx, "bob", &p, time.Now().Add(-72*time.Hour), 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than a period away")
	// a day behind: the server's period is the caller's next, decided right
	d, err := s.Take(ctx, "bob", &p, time.Now().Add(-24*time.Hour), 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.LessOrEqual(t, d.ResetAfter, time.Until(midnight(time.Now()))+time.Second)
}
