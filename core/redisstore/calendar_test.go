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
		// a usage screen's figures, through the verbs' script
		before = time.Now()
		u, err := core.MustNewLimiter(s, p).Usage(ctx, "alice")
		require.NoError(t, err)
		after = time.Now()
		assert.Equal(t, int64(3), u.Used)
		assert.Equal(t, int64(0), u.Remaining)
		assert.GreaterOrEqual(t, u.ResetAfter, next.Sub(after)-time.Millisecond)
		assert.LessOrEqual(t, u.ResetAfter, next.Sub(before)+time.Millisecond)
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

// TestCalendarCallerSkew (issue 36): the script decides in the period
// holding its own now among the periods the caller's clock gave, whatever
// the caller's period: callers a period behind, in the same period and a
// period ahead of the deciding clock, at the boundaries to the
// microsecond, get core's decision at the deciding clock's instant.
func TestCalendarCallerSkew(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	srv := redistest.StartNode(t)
	client := srv.NewClient(t)
	s := newStore(t, client, WithClientTime()) // ARGV[1] is the deciding now
	p := core.Policy{Name: "cal-skew", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(2, core.CalendarDay, ny), core.PerMinute(5)}}
	c, err := s.policy(&p)
	require.NoError(t, err)
	cp, err := p.Compile()
	require.NoError(t, err)
	ctx := context.Background()
	// the day of New York's March change, 23 hours long, and its neighbours
	_, b1, b2, _ := cp.CalendarPeriod(0, time.Date(2026, 3, 8, 12, 0, 0, 0, ny).UnixMicro())
	_, _, b3, _ := cp.CalendarPeriod(0, b2)
	n := 0
	for _, decide := range []int64{b1 - 1, b1, b1 + 1, b2 - 1, b2, b2 + 1, b3 - 1} {
		for _, skew := range []int64{-24 * 3600e6, -3600e6, 0, 3600e6, 23 * 3600e6} {
			caller := decide + skew
			key := "k" + time.UnixMicro(caller).String() + time.UnixMicro(decide).String()
			st := make([]int64, cp.StateWords())
			for range 3 {
				want := cp.Decide(st, decide, 1)
				tail := c.calendarArgs(c.tail, caller).tail
				vals, err := s.run(ctx, c, s.args(c, tail, key, time.UnixMicro(decide), 1))
				require.NoError(t, err, "caller %v decide %v", time.UnixMicro(caller), time.UnixMicro(decide))
				got, err := decision(c, vals, false)
				require.NoError(t, err)
				require.Equal(t, want, got, "caller %v decide %v", time.UnixMicro(caller).In(ny), time.UnixMicro(decide).In(ny))
				n++
			}
		}
	}
	assert.Equal(t, 7*5*3, n)
}
