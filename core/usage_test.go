package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestPeekZeroRetryAfterExact (issue 37): AllowN(ctx, key, 0) and
// PeekN(ctx, key, 0) of an exhausted key answer the exact wait until a
// request of cost 1 is admitted (GCRA 100/min: 600 ms, not the minute
// until the key is full), the same as Peek's, and a request at that
// instant is admitted while one a microsecond before is not.
func TestPeekZeroRetryAfterExact(t *testing.T) {
	warmup := map[core.Algorithm]int{core.FixedWindow: 30, core.SlidingWindowLog: 30, core.SlidingWindowCounter: 30}
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			s := mustMem()
			defer s.Close()
			clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
			pol := core.Policy{Name: "p", Algorithm: alg, Limits: []core.Limit{core.PerMinute(100)}}
			if alg == core.SlidingWindowCounter {
				pol.Buckets = 4
			}
			l := core.MustNewLimiter(s, pol, core.WithClock(clock))
			ctx := context.Background()
			for range warmup[alg] { // spread state: the window algorithms' wait then differs from their reset
				clock.Advance(time.Second)
				for range 4 {
					_, err := l.Allow(ctx, "k")
					require.NoError(t, err)
				}
			}
			for {
				d, err := l.Allow(ctx, "k")
				require.NoError(t, err)
				if !d.Allowed {
					break
				}
			}
			one, err := l.PeekN(ctx, "k", 1)
			require.NoError(t, err)
			require.False(t, one.Allowed)
			for name, peek := range map[string]func() (core.Decision, error){
				"AllowN0": func() (core.Decision, error) { return l.AllowN(ctx, "k", 0) },
				"PeekN0":  func() (core.Decision, error) { return l.PeekN(ctx, "k", 0) },
			} {
				d, err := peek()
				require.NoError(t, err)
				assert.False(t, d.Allowed, name)
				assert.Equal(t, one.RetryAfter, d.RetryAfter, "%s: the wait of a request of cost 1", name)
			}
			u, err := l.Usage(ctx, "k")
			require.NoError(t, err)
			binding := core.Usage{Limit: core.PerMinute(100), Used: 100, Remaining: 0, ResetAfter: u.ResetAfter, RetryAfter: one.RetryAfter, Policy: "p"}
			assert.Equal(t, core.Usage{Limit: core.PerMinute(100), Used: 100, Remaining: 0, ResetAfter: u.ResetAfter, RetryAfter: one.RetryAfter, Policy: "p",
				Limits: []core.Usage{binding}}, u, "one limit: Limits repeats the binding figures")
			if alg == core.GCRA {
				assert.Equal(t, 600*time.Millisecond, one.RetryAfter, "GCRA 100/min: one request back every 600 ms")
			}
			clock.Advance(one.RetryAfter - time.Microsecond)
			d, err := l.Allow(ctx, "k")
			require.NoError(t, err)
			assert.False(t, d.Allowed, "a µs before RetryAfter")
			clock.Advance(time.Microsecond)
			d, err = l.Allow(ctx, "k")
			require.NoError(t, err)
			assert.True(t, d.Allowed, "at RetryAfter")
		})
	}
}

// TestUsage (issue 37): Usage reads used, remaining now (Peek's Remaining
// is after one more request) and the reset, consuming nothing.
func TestUsage(t *testing.T) {
	s := mustMem()
	defer s.Close()
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l := core.MustNewLimiter(s, core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(100), core.Per(1000, time.Hour)}}, core.WithClock(clock))
	ctx := context.Background()
	u, err := l.Usage(ctx, "k")
	require.NoError(t, err)
	require.Len(t, u.Limits, 2, "every limit's figures")
	assert.Equal(t, core.Usage{Limit: core.PerMinute(100), Used: 0, Remaining: 100, ResetAfter: u.ResetAfter, Policy: "p", Limits: u.Limits}, u, "a fresh key")
	assert.Equal(t, []int64{100, 0, 1000, 0}, []int64{u.Limits[0].Limit.Requests, u.Limits[0].Used, u.Limits[1].Limit.Requests, u.Limits[1].Used}, "a fresh key, per limit")
	for range 30 {
		_, err = l.Allow(ctx, "k")
		require.NoError(t, err)
	}
	for range 3 {
		u, err = l.Usage(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, int64(30), u.Used)
		assert.Equal(t, int64(70), u.Remaining, "70 left now")
		assert.Equal(t, time.Minute-time.Duration(time.Unix(1_700_000_000, 0).Unix()%60)*time.Second, u.ResetAfter, "the fixed window's end")
		assert.Zero(t, u.RetryAfter)
		// each limit alone (issue 37's admin GET): 30 of 100 a minute,
		// 30 of 1000 an hour, each full again at its own window's end
		require.Len(t, u.Limits, 2)
		assert.Equal(t, []int64{100, 30, 70}, []int64{u.Limits[0].Limit.Requests, u.Limits[0].Used, u.Limits[0].Remaining})
		assert.Equal(t, []int64{1000, 30, 970}, []int64{u.Limits[1].Limit.Requests, u.Limits[1].Used, u.Limits[1].Remaining})
		assert.Equal(t, u.ResetAfter, u.Limits[0].ResetAfter)
		assert.Equal(t, time.Hour-time.Duration(time.Unix(1_700_000_000, 0).Unix()%3600)*time.Second, u.Limits[1].ResetAfter, "the hour's window end")
	}
	p, err := l.PeekN(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, int64(69), p.Remaining, "Peek: after one more request")
}
