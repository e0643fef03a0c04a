package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestFixedWindowValue pins the single-limit fixed window's in-place
// path: the stored value is count × M + window index mod M, an allowed
// request adds to it without touching the TTL, a denied one leaves it as
// it was (or at the capacity when denied requests count), and a denied
// request on a fresh key leaves no key behind.
func TestFixedWindowValue(t *testing.T) {
	s, c, _ := nodeStore(t)
	ctx := context.Background()
	for _, cd := range []bool{false, true} {
		p := mustPolicy(t, core.Policy{Name: "fwv" + strconv.FormatBool(cd), Algorithm: core.FixedWindow, CountDenied: cd, Limits: []core.Limit{core.PerMinute(5)}})
		m := fwModulus(5)
		require.Equal(t, int64(1)<<33, m)
		ks, err := s.Keys(p, "u")
		require.NoError(t, err)
		key := ks[0]
		now := epoch.Add(10 * time.Second)
		idx := now.UnixMicro() / time.Minute.Microseconds()
		val := func() int64 {
			v, err := c.Get(ctx, key).Int64()
			require.NoError(t, err)
			return v
		}
		take := func(cost int64, allowed bool, rem int64) {
			t.Helper()
			d, err := s.Take(ctx, "u", p, now, cost)
			require.NoError(t, err)
			require.Equal(t, allowed, d.Allowed, "cost %d", cost)
			require.Equal(t, rem, d.Remaining, "cost %d", cost)
			end := (now.UnixMicro()/time.Minute.Microseconds() + 1) * time.Minute.Microseconds()
			require.Equal(t, end-now.UnixMicro(), d.ResetAfter.Microseconds())
		}

		take(9, false, 0) // a fresh key, denied
		if cd {
			require.Equal(t, 5*m+idx%m, val(), "a counted denial fills the window")
			require.NoError(t, c.Del(ctx, key).Err())
		} else {
			n, err := c.Exists(ctx, key).Result()
			require.NoError(t, err)
			require.Zero(t, n, "a denied request on a fresh key leaves no key")
		}

		take(1, true, 4)
		require.Equal(t, 1*m+idx%m, val())
		ttl := c.PTTL(ctx, key).Val()
		take(2, true, 2) // in place
		require.Equal(t, 3*m+idx%m, val())
		require.LessOrEqual(t, c.PTTL(ctx, key).Val(), ttl, "the in-place add keeps the window's TTL")

		take(3, false, 0) // 3 + 3 > 5
		want := int64(3)
		if cd {
			want = 5 // trimmed to the capacity
		}
		require.Equal(t, want*m+idx%m, val())
		take(0, true, 5-want) // a peek
		require.Equal(t, want*m+idx%m, val())

		// the next window starts afresh
		now = now.Add(time.Minute)
		idx++
		take(1, true, 4)
		require.Equal(t, 1*m+idx%m, val())
	}
}

// TestFixedWindowModulus: the largest value an in-place add can make
// stays exact in Lua's doubles for every capacity validation accepts,
// and a capacity of 2^31 − 1 still decides exactly.
func TestFixedWindowModulus(t *testing.T) {
	for _, capa := range []int64{1, 5, 1<<19 - 2, 1 << 19, 1e9, 1<<31 - 1} {
		m := fwModulus(capa)
		assert.LessOrEqual(t, (2*capa+2)*m, int64(1)<<53, "capacity %d", capa)
		if m < 1<<33 {
			assert.Greater(t, (2*capa+2)*2*m, int64(1)<<53, "capacity %d: M is not the largest", capa)
		}
		assert.GreaterOrEqual(t, m, int64(1)<<21)
	}
	assert.Equal(t, int64(1)<<33, fwModulus(1<<19-1))

	s, _, _ := nodeStore(t)
	ctx := context.Background()
	p := mustPolicy(t, core.Policy{Name: "fwbig", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(1<<31 - 1)}})
	now := epoch
	for _, step := range []struct {
		cost, rem int64
		ok        bool
	}{{1 << 30, 1<<30 - 1, true}, {1 << 30, 0, false}, {1<<30 - 1, 0, true}, {1, 0, false}} {
		d, err := s.Take(ctx, "u", p, now, step.cost)
		require.NoError(t, err)
		require.Equal(t, step.ok, d.Allowed, "cost %d", step.cost)
		require.Equal(t, step.rem, d.Remaining, "cost %d", step.cost)
	}
}

// TestFixedWindowRedisTime: under Redis TIME the in-place path reads the
// clock from the key's TTL. Every decision's ResetAfter must lie within
// [the window's end − TIME read after, that − TIME read before + 2 ms],
// a window never admits more than its capacity, and the test goes on
// until some window was filled to its capacity and denials were judged
// (so the denial branch ran), for at least 1.5 s and at most 10 s.
func TestFixedWindowRedisTime(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	// 1.2 s windows: the TTL path serves the first 0.2 s of each (it
	// leaves the last second to TIME), the rest takes TIME. A capacity
	// of 100 is reached within the first 0.2 s on a fast machine (so
	// both paths deny) and within the window on a loaded one.
	const w = 1200 * time.Millisecond
	const capa = 100
	p := mustPolicy(t, core.Policy{Name: "fwtime", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(capa, w)}})
	redisNow := func() int64 {
		tm, err := c.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMicro()
	}
	admitted := map[int64]int{}
	checked, denied := 0, 0
	filled := func() bool {
		for _, n := range admitted {
			if n == capa {
				return true
			}
		}
		return false
	}
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond || (denied == 0 || !filled()) && time.Since(start) < 10*time.Second {
		t0 := redisNow()
		d, err := s.Take(ctx, "u", p, time.Time{}, 1)
		require.NoError(t, err)
		t1 := redisNow()
		w0, w1 := t0/w.Microseconds(), t1/w.Microseconds()
		if w0 != w1 && (w1+1)*w.Microseconds()-(t0+d.ResetAfter.Microseconds()) < w.Microseconds()/2 {
			// TIME ticked into the next window during the request: its
			// reset (checked below against that window's end, to the
			// same few ms) says which window decided it
			w0 = w1
		}
		checked++
		end := (w0 + 1) * w.Microseconds()
		assert.GreaterOrEqual(t, d.ResetAfter.Microseconds(), end-t1, "reset before the window's end")
		assert.LessOrEqual(t, d.ResetAfter.Microseconds(), end-t0+2000, "reset more than 2 ms after the window's end")
		if d.Allowed {
			admitted[w0]++
		} else {
			denied++
			assert.Equal(t, d.ResetAfter, d.RetryAfter)
		}
	}
	t.Logf("%d decisions, %d denied; admitted per window %v", checked, denied, admitted)
	require.Greater(t, checked, 100, "too few decisions to judge")
	assert.Positive(t, denied, "no denial was judged")
	assert.True(t, filled(), "no window was filled to its capacity")
	for win, n := range admitted {
		assert.LessOrEqual(t, n, capa, "window %d", win)
	}
}

// TestFixedWindowClientTimeKeyNextWindow: a key a WithClientTime server
// wrote (its pad a second longer) 150 ms before its window ended is not
// taken for the current window by a Redis-TIME server's TTL path 100 ms
// into the next window: the request is decided in a fresh window, as
// core would (found by review: it was denied with the old count).
//
// The test drives the clocks instead of waiting on Redis's: the
// client-time server writes at a client time 150 ms before the end of
// the window before Redis's current one, and the 250 ms that would have
// passed are taken off the key's TTL with PEXPIRE. What the Redis-TIME
// server then reads (a key of an earlier window whose TTL is the pad
// minus 100 ms) is exactly what it would read in the real sequence.
func TestFixedWindowClientTimeKeyNextWindow(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	a := newStore(t, c, WithClientTime())
	b := newStore(t, c)
	ctx := context.Background()
	p := mustPolicy(t, core.Policy{Name: "mix", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(3, 2*time.Second)}})
	const w = int64(2_000_000)
	tm, err := c.Time(ctx).Result()
	require.NoError(t, err)
	end := tm.UnixMicro() / w * w // the end of the window before Redis's current one
	d, err := a.Take(ctx, "u", p, time.UnixMicro(end-150_000), 3)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	ks, err := b.Keys(p, "u")
	require.NoError(t, err)
	ttl, err := c.PTTL(ctx, ks[0]).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Second, "the client-time pad is a second longer")
	require.NoError(t, c.PExpire(ctx, ks[0], ttl-250*time.Millisecond).Err())

	d, err = b.Take(ctx, "u", p, time.Time{}, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "a fresh window admits")
	assert.Equal(t, int64(2), d.Remaining)
}
