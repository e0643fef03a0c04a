package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// stallPolicy fails open, as the example servers' rules do: every
// request the tier cannot decide at the remote store is admitted
// (Degraded).
var stallPolicy = core.Policy{Name: "stall", Limits: []core.Limit{core.PerMinute(1000)}}

// eventually waits up to 10 s for cond: a bound only for a failing run
// (the breakers under test would otherwise stay open for an hour).
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, msg)
}

// TestSlowStoreReplyClosesTheBreaker: a store that stalls (every call
// held until the stall ends) opens the breaker as fast as a dead one —
// the threshold's three timeouts — but the watch the tier keeps in
// flight while the breaker cools down gets the late reply when the stall
// ends, and the breaker closes then, not after its cool-down (an hour
// here, on a manual clock that never moves): the requests after the
// stall are decided by the store, none by the fail mode. Old code: the
// breaker stayed open for the cool-down and every one of them failed
// open.
func TestSlowStoreReplyClosesTheBreaker(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	tier := newTier(t, pingFake{batchFake{f}}, WithBreaker(3, time.Hour, time.Hour), WithClock(clk),
		withoutStarvationGrace(), withoutSyncLoop(), WithDefaultFailMode(core.FailOpen))
	lim := core.MustNewLimiter(tier, stallPolicy, core.WithTimeout(5*time.Millisecond), core.WithClock(clk))
	ctx := context.Background()
	_, err := lim.Allow(ctx, "k")
	require.NoError(t, err)

	stall := make(chan struct{})
	f.gate.Store(&stall)
	for i := 0; i < 3; i++ {
		d, err := lim.Allow(ctx, "k")
		require.Error(t, err)
		assert.True(t, d.Allowed && d.Degraded, "timed out: admitted by the fail mode")
	}
	require.Equal(t, "open", tier.BreakerState(), "three timeouts open the breaker")
	require.EqualValues(t, 1, tier.breakerOpenings())
	eventually(t, tier.dom.def.watching.Load, "a watch call is in flight while the breaker cools down")
	d, err := lim.Allow(ctx, "k")
	require.ErrorIs(t, err, core.ErrCircuitOpen, "open: the request does not wait")
	assert.True(t, d.Degraded)

	close(stall) // the stall ends: the watch's reply arrives
	eventually(t, func() bool { return tier.BreakerState() == "closed" }, "the late reply closes the breaker")
	calls := f.calls.Load()
	for i := 0; i < 10; i++ {
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.False(t, d.Degraded, "decided by the store, not the fail mode")
	}
	assert.EqualValues(t, 10, f.calls.Load()-calls, "each request after the stall went to the store")
	assert.EqualValues(t, 1, tier.breakerOpenings())
}

// TestDeadStoreStaysOpenWhileWatched: a store that never answers opens
// the breaker at the threshold's third timeout, as before, and the
// breaker stays open: the watch never gets a reply, requests do not call
// the store (one command is in flight, the watch's), and Close ends the
// watch. A store that refuses connections (gone, not slow) is not
// watched at all.
func TestDeadStoreStaysOpenWhileWatched(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		f := newFake()
		clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
		tier, err := newFleet(pingFake{batchFake{f}}, WithBreaker(3, time.Hour, time.Hour), WithClock(clk),
			withoutStarvationGrace(), withoutSyncLoop(), WithDefaultFailMode(core.FailOpen))
		require.NoError(t, err)
		lim := core.MustNewLimiter(tier, stallPolicy, core.WithTimeout(5*time.Millisecond), core.WithClock(clk))
		ctx := context.Background()
		f.hang.Store(true)
		for i := 0; i < 3; i++ {
			_, err := lim.Allow(ctx, "k")
			require.Error(t, err)
			assert.NotErrorIs(t, err, core.ErrCircuitOpen, "the first three wait for the store")
		}
		require.Equal(t, "open", tier.BreakerState())
		eventually(t, func() bool { return tier.dom.def.watching.Load() && f.calls.Load() == 4 }, "three requests and the watch")
		calls := f.calls.Load()
		for i := 0; i < 50; i++ {
			_, err := lim.Allow(ctx, "k")
			require.ErrorIs(t, err, core.ErrCircuitOpen)
		}
		assert.Equal(t, calls, f.calls.Load(), "no request called the store")
		assert.Equal(t, "open", tier.BreakerState())
		assert.EqualValues(t, 1, tier.breakerOpenings())
		require.NoError(t, tier.Close()) // ends the watch in flight
		assert.False(t, tier.dom.def.watching.Load())
	})
	t.Run("refused", func(t *testing.T) {
		f := newFake()
		clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
		tier := newTier(t, pingFake{batchFake{f}}, WithBreaker(3, time.Hour, time.Hour), WithClock(clk),
			withoutSyncLoop(), WithDefaultFailMode(core.FailOpen))
		lim := core.MustNewLimiter(tier, stallPolicy, core.WithClock(clk))
		f.setFail(errDown)
		for i := 0; i < 3; i++ {
			_, err := lim.Allow(context.Background(), "k")
			require.Error(t, err)
		}
		require.Equal(t, "open", tier.BreakerState())
		assert.False(t, tier.dom.def.slow.Load(), "a refused connection is not a slow store")
		tier.probeOpen() // what the loop does when woken: no watch for a refused connection
		assert.False(t, tier.dom.def.watching.Load())
		assert.EqualValues(t, 3, f.calls.Load())
	})
}

// TestRedisStallFailsOpenOnlyWhileItLasts: a redis-server the test
// stops (SIGSTOP) while four requests are in flight, then continues
// (SIGCONT) once the breaker is open and its watch waits on Redis: the
// four requests time out together and fail open, as do the requests of
// the next waves until the breaker opens (as a dead Redis opens it);
// Redis's late reply to the watch closes it, and
// the requests after the stall are all decided by Redis. Old code: the
// breaker stayed open for its cool-down (an hour here) and all of them
// failed open. The tier reads an idle scheduling-latency probe, so that
// the machine's load neither moves the deadlines nor forgives timeouts.
func TestRedisStallFailsOpenOnlyWhileItLasts(t *testing.T) {
	srv := redistest.StartNode(t)
	c := redis.NewClient(srv.ClientOptions())
	t.Cleanup(func() { _ = c.Close() })
	rs, err := redisstore.New(c)
	require.NoError(t, err)
	tier := newTier(t, rs, WithBreaker(3, time.Hour, time.Hour), WithDefaultFailMode(core.FailOpen),
		withLagProbe(schedlag.New()), withoutSyncLoop())
	const inFlight, after = 4, 20
	pol := core.Policy{Name: "stall", Limits: []core.Limit{core.PerMinute(inFlight + after + 2)}}
	lim := core.MustNewLimiter(tier, pol, core.WithTimeout(50*time.Millisecond))
	// after the stall: a deadline no loaded host makes a healthy Redis miss
	calm := core.MustNewLimiter(tier, pol, core.WithTimeout(redistest.StoreTimeout))
	ctx := context.Background()
	_, err = calm.Allow(ctx, "k") // loads the script
	require.NoError(t, err)

	srv.Pause()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failedOpen := 0
	for i := 0; i < inFlight; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := lim.Allow(ctx, "k")
			mu.Lock()
			defer mu.Unlock()
			if err != nil && d.Allowed && d.Degraded {
				failedOpen++
			}
		}()
	}
	wg.Wait()
	require.Equal(t, inFlight, failedOpen, "the requests in flight during the stall fail open")
	// those four were one wave (one failure, unless the load delayed a
	// goroutine's start past another's timeout); a stall that goes on
	// opens the breaker after the threshold's waves
	for i := 0; i < 3 && tier.BreakerState() == "closed"; i++ {
		d, err := lim.Allow(ctx, "k")
		require.Error(t, err)
		require.True(t, d.Allowed && d.Degraded)
		failedOpen++
	}
	require.Equal(t, "open", tier.BreakerState(), "a stall of three waves opens the breaker")
	t.Logf("failed open during the stall: %d", failedOpen)
	eventually(t, tier.dom.def.watching.Load, "the watch waits on the stopped Redis")
	srv.Resume()
	eventually(t, func() bool { return tier.BreakerState() == "closed" }, "Redis's late reply closes the breaker")

	admitted, denied := 0, 0
	for i := 0; i < after+1; i++ {
		d, err := calm.Allow(ctx, "k")
		require.NoError(t, err, "decided by Redis")
		require.False(t, d.Degraded)
		if d.Allowed {
			admitted++
		} else {
			denied++
		}
	}
	// Redis runs the stalled requests' scripts when it continues, unless
	// it sees their closed connections first: 1 + (0 to 4) + 21 of 26
	t.Logf("after the stall: %d admitted, %d denied by Redis", admitted, denied)
	assert.GreaterOrEqual(t, admitted, after, "admitted by Redis after the stall")
	assert.EqualValues(t, 1, tier.breakerOpenings())
}

// TestStallWaveCountsOnce: the timeouts of calls that were in flight
// together count as one failure towards the breaker: four requests held
// by a stalled store (all four inside it before the first times out)
// leave the breaker closed with one failure counted; two more timeouts,
// each of a call started after the last counted one, reach the
// threshold (3) and open it. Old code: the four opened it.
func TestStallWaveCountsOnce(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	tier := newTier(t, pingFake{batchFake{f}}, WithBreaker(3, time.Hour, time.Hour), WithClock(clk),
		withoutStarvationGrace(), withoutSyncLoop(), withoutProbeLoop(), WithDefaultFailMode(core.FailOpen))
	lim := core.MustNewLimiter(tier, stallPolicy, core.WithClock(clk))
	ctx := context.Background()
	_, err := lim.Allow(ctx, "k")
	require.NoError(t, err)
	calls := f.calls.Load()

	stall := make(chan struct{})
	f.gate.Store(&stall)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := lim.Allow(ctx, "k")
			assert.Equal(t, "timeout", core.ClassifyError(err))
			assert.True(t, d.Allowed && d.Degraded)
		}()
	}
	eventually(t, func() bool { return f.calls.Load() == calls+4 }, "four calls in flight")
	f.setFail(context.DeadlineExceeded) // each of them times out as the gate opens
	close(stall)
	wg.Wait()
	f.gate.Store(nil)
	assert.Equal(t, "closed", tier.BreakerState(), "one wave is one failure")
	assert.EqualValues(t, 1, tier.dom.def.fails.Load())
	for i := 0; i < 2; i++ {
		_, err := lim.Allow(ctx, "k")
		require.Equal(t, "timeout", core.ClassifyError(err))
	}
	assert.Equal(t, "open", tier.BreakerState(), "three waves open it")
	assert.EqualValues(t, 1, tier.breakerOpenings())
}
