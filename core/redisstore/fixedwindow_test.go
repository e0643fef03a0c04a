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
// and a window never admits more than its capacity.
func TestFixedWindowRedisTime(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	// 1.2 s windows: the TTL path serves the first 0.2 s of each (it
	// leaves the last second to TIME), the rest takes TIME
	const w = 1200 * time.Millisecond
	const capa = 400
	p := mustPolicy(t, core.Policy{Name: "fwtime", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(capa, w)}})
	redisNow := func() int64 {
		tm, err := c.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMicro()
	}
	admitted := map[int64]int{}
	checked := 0
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		t0 := redisNow()
		d, err := s.Take(ctx, "u", p, time.Time{}, 1)
		require.NoError(t, err)
		t1 := redisNow()
		w0, w1 := t0/w.Microseconds(), t1/w.Microseconds()
		if w0 != w1 {
			continue // the window is ambiguous: the decision may be in either
		}
		checked++
		end := (w0 + 1) * w.Microseconds()
		assert.GreaterOrEqual(t, d.ResetAfter.Microseconds(), end-t1, "reset before the window's end")
		assert.LessOrEqual(t, d.ResetAfter.Microseconds(), end-t0+2000, "reset more than 2 ms after the window's end")
		if d.Allowed {
			admitted[w0]++
		} else {
			assert.Equal(t, d.ResetAfter, d.RetryAfter)
		}
	}
	require.Greater(t, checked, 100, "too few unambiguous decisions to judge")
	for win, n := range admitted {
		assert.LessOrEqual(t, n, capa, "window %d", win)
	}
}

// TestFixedWindowClientTimeKeyNextWindow: a key a WithClientTime server
// wrote (its pad a second longer) just before its window ended is not
// taken for the current window by a Redis-TIME server's TTL path: a
// request 100 ms into the next window is decided in a fresh window, as
// core would (found by review: it was denied with the old count).
func TestFixedWindowClientTimeKeyNextWindow(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	a := newStore(t, c, WithClientTime())
	b := newStore(t, c)
	ctx := context.Background()
	p := mustPolicy(t, core.Policy{Name: "mix", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(3, 2*time.Second)}})
	const w = int64(2_000_000)
	redisNow := func() int64 {
		tm, err := c.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMicro()
	}
	// Redis's clock is the test's subject here: wait (at most one window)
	// until 150 ms before a window's end
	n := redisNow()
	if left := (n/w+1)*w - n; left > 150_000 {
		time.Sleep(time.Duration(left-150_000) * time.Microsecond)
	} else {
		time.Sleep(time.Duration(left+w-150_000) * time.Microsecond)
	}
	n = redisNow()
	end := (n/w + 1) * w
	d, err := a.Take(ctx, "u", p, time.UnixMicro(n), 3)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	time.Sleep(time.Duration(end-redisNow()+100_000) * time.Microsecond)
	t0 := redisNow()
	d, err = b.Take(ctx, "u", p, time.Time{}, 1)
	require.NoError(t, err)
	if t0/w != end/w {
		t.Skip("the machine was too slow to decide within the next window; nothing to judge")
	}
	require.True(t, d.Allowed, "a fresh window admits")
	assert.Equal(t, int64(2), d.Remaining)
}
