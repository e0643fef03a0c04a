package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// events records the tier's events.
type events struct {
	mu sync.Mutex
	ev []core.Event
}

func (r *events) Observe(e core.Event) { r.mu.Lock(); r.ev = append(r.ev, e); r.mu.Unlock() }

func (r *events) kinds(k core.EventKind) []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.Event
	for _, e := range r.ev {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// stateNamed is the breaker state whose String is s (an event's From or
// To), or 255 for a name no state has.
func stateNamed(s string) breakerState {
	for st := breakerClosed; st <= breakerHalfOpen; st++ {
		if st.String() == s {
			return st
		}
	}
	return 255
}

func (r *events) transitions() [][2]breakerState {
	var out [][2]breakerState
	for _, e := range r.kinds(core.EventBreaker) {
		out = append(out, [2]breakerState{stateNamed(e.From), stateNamed(e.To)})
	}
	return out
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// The breaker tests that count failures run without the background sync
// loop (withoutSyncLoop): on the wall clock it forwards the fallback's
// admissions to the failing fake, and on a host at load 40 a tick between
// two requests was one more failure, which opened the breaker a request
// early. Those whose request is to be the probe after a manual clock's
// cool-down run without the background probe loop (withoutProbeLoop): on
// the wall clock it could probe first, between the clock's advance and the
// request, and reopen the breaker (seen in a clean-clone CI run).
func TestBreakerOpensFailsFastAndProbes(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	ev := &events{}
	tier := newTier(t, pingFake{batchFake{f}}, WithClock(clk), WithObserver(ev), WithBreaker(3, time.Second, 100*time.Millisecond), WithFlapHorizon(0), withoutSyncLoop(), withoutProbeLoop())
	lim := core.MustNewLimiter(tier, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(100)}}, core.WithClock(clk))
	ctx := context.Background()

	d, err := lim.Allow(ctx, "k")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	f.setFail(errDown)
	for i := 0; i < 3; i++ {
		d, err = lim.Allow(ctx, "k")
		require.ErrorIs(t, err, errDown)
		assert.True(t, d.Degraded && d.Allowed, "fail open")
	}
	require.Equal(t, "open", tier.BreakerState())
	calls := f.calls.Load()
	for i := 0; i < 50; i++ {
		d, err = lim.Allow(ctx, "k")
		require.ErrorIs(t, err, core.ErrCircuitOpen)
		assert.Equal(t, "circuit_open", core.ClassifyError(err))
		assert.True(t, d.Degraded && d.Allowed)
	}
	assert.Equal(t, calls, f.calls.Load(), "an open breaker never calls the remote store")

	// After the cool-down (and one probe interval, left to the background
	// probe) one request is the probe: a failing one keeps the breaker
	// open for a probe interval, a good one closes it.
	clk.Advance(time.Second + 100*time.Millisecond)
	_, err = lim.Allow(ctx, "k")
	require.ErrorIs(t, err, errDown, "the probe is a real decision")
	require.Equal(t, "open", tier.BreakerState())
	f.setFail(nil)
	_, err = lim.Allow(ctx, "k")
	require.ErrorIs(t, err, core.ErrCircuitOpen, "no probe before the probe interval")
	clk.Advance(200 * time.Millisecond)
	d, err = lim.Allow(ctx, "k")
	require.NoError(t, err)
	assert.False(t, d.Degraded)
	require.Equal(t, "closed", tier.BreakerState())
	assert.Equal(t, [][2]breakerState{{breakerClosed, breakerOpen},
		{breakerOpen, breakerHalfOpen}, {breakerHalfOpen, breakerOpen},
		{breakerOpen, breakerHalfOpen}, {breakerHalfOpen, breakerClosed}}, ev.transitions())
}

func TestBreakerSuccessResetsTheCount(t *testing.T) {
	f := newFake()
	tier := newTier(t, pingFake{batchFake{f}}, WithBreaker(2, time.Second, time.Second), withoutSyncLoop())
	p := &core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(100)}}
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		f.setFail(errDown)
		_, err := tier.Take(ctx, "k", p, t0, 1)
		require.Error(t, err)
		f.setFail(nil)
		_, err = tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
	}
	assert.Equal(t, "closed", tier.BreakerState(), "failures must be consecutive")
}

// TestBreakerHalfOpenWithoutPing: the breaker is probed by one real
// request after the cool-down; a failed probe reopens for a probe
// interval, a good one closes.
func TestBreakerHalfOpenWithoutPing(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	ev := &events{}
	tier := newTier(t, batchFake{f}, WithClock(clk), WithObserver(ev), WithBreaker(1, time.Second, time.Second), withoutSyncLoop(), withoutProbeLoop())
	p := &core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(100)}}
	ctx := context.Background()
	f.setFail(errDown)
	_, err := tier.Take(ctx, "k", p, t0, 1)
	require.ErrorIs(t, err, errDown)
	_, err = tier.Take(ctx, "k", p, t0, 1)
	require.ErrorIs(t, err, core.ErrCircuitOpen)
	clk.Advance(2 * time.Second) // the cool-down and a probe interval
	_, err = tier.Take(ctx, "k", p, t0, 1)
	require.ErrorIs(t, err, errDown, "the probe request reached the remote store")
	_, err = tier.Take(ctx, "k", p, t0, 1)
	require.ErrorIs(t, err, core.ErrCircuitOpen, "a failed probe reopens")
	clk.Advance(2 * time.Second) // the cool-down and a probe interval
	f.setFail(nil)
	d, err := tier.Take(ctx, "k", p, t0, 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, "closed", tier.BreakerState())
	assert.Equal(t, [][2]breakerState{
		{breakerClosed, breakerOpen}, {breakerOpen, breakerHalfOpen},
		{breakerHalfOpen, breakerOpen}, {breakerOpen, breakerHalfOpen},
		{breakerHalfOpen, breakerClosed},
	}, ev.transitions())
}

// TestFailLocalDividesByFleetSize: while the remote store is down, a
// FailLocal policy decides from the embedded store at its limit divided by
// the fleet size, less what the tier admitted remotely in the window; the
// local admissions are charged to the remote store once it answers again.
func TestFailLocalDividesByFleetSize(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	ev := &events{}
	tier := newTier(t, pingFake{batchFake{f}}, WithClock(clk), WithObserver(ev), WithFleetSize(3), WithBreaker(1, time.Second, time.Second), WithFlapHorizon(0), withoutSyncLoop(), withoutProbeLoop())
	pol := core.Policy{Name: "local", FailMode: core.FailLocal, FleetSize: 4, Limits: []core.Limit{core.PerMinute(10)}}
	lim := core.MustNewLimiter(tier, pol, core.WithClock(clk))
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	f.setFail(errDown)
	admitted := 0
	for i := 0; i < 10; i++ {
		d, err := lim.Allow(ctx, "k")
		require.Error(t, err)
		require.True(t, d.Degraded)
		if d.Allowed {
			admitted++
			assert.Equal(t, core.PerMinute(2), d.Limit, "10 per minute / fleet size 4 (the policy's, not the tier's 3)")
		}
		assert.Equal(t, "local", d.Policy)
	}
	assert.Zero(t, admitted, "the 3 remote admissions used up the tier's share (10/4 = 2)")
	assert.Len(t, ev.kinds(core.EventFallback), 10)

	// A fresh key: its share is whole.
	for i := 0; i < 5; i++ {
		d, _ := lim.Allow(ctx, "fresh")
		if d.Allowed {
			admitted++
		}
	}
	assert.Equal(t, 2, admitted)
	f.setFail(nil)
	clk.Advance(2 * time.Second) // the cool-down and a probe interval
	require.NoError(t, tier.Sync(ctx), "the breaker is open: the round skips the key")
	assert.Equal(t, int64(10), f.peek("fresh", lim.Policy(), clk.Now(), 0).Remaining)
	d, err := lim.Allow(ctx, "fresh") // the probe, with the owed units
	require.NoError(t, err)
	assert.False(t, d.Degraded)
	assert.Equal(t, int64(7), d.Remaining, "the 2 local admissions were charged to the remote store")
}

// TestHungRemoteFailsFastOnceOpen: a hung remote store costs the deadline
// only to the requests sent before the breaker opened.
func TestHungRemoteFailsFastOnceOpen(t *testing.T) {
	f := newFake()
	tier := newTier(t, pingFake{batchFake{f}}, WithBreaker(3, time.Hour, time.Hour), withoutStarvationGrace(), withoutSyncLoop())
	lim := core.MustNewLimiter(tier, core.Policy{Name: "p", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(100)}}, core.WithTimeout(5*time.Millisecond))
	f.hang.Store(true)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		d, err := lim.Allow(ctx, "k")
		var se *core.StoreError
		require.ErrorAs(t, err, &se)
		assert.True(t, core.ClassifyError(se) == "timeout")
		assert.False(t, d.Allowed)
	}
	// the tier's watch of the open breaker is one call in flight, not a
	// request's (it waits out the cool-down)
	require.Eventually(t, func() bool { return tier.dom.def.watching.Load() && f.calls.Load() == 4 }, 10*time.Second, time.Millisecond)
	calls := f.calls.Load()
	for i := 0; i < 100; i++ {
		d, err := lim.Allow(ctx, "k")
		require.ErrorIs(t, err, core.ErrCircuitOpen)
		assert.False(t, d.Allowed)
		assert.True(t, d.Degraded)
	}
	assert.Equal(t, calls, f.calls.Load(), "no request after the opening waited on the remote store")
}

func TestFailLocalAcceptedByLimiter(t *testing.T) {
	tier := newTier(t, newFake())
	_, err := core.NewLimiter(tier, core.Policy{Name: "p", FailMode: core.FailLocal, Limits: []core.Limit{core.PerMinute(1)}})
	require.NoError(t, err)
}

// TestFailLocalAfterLimitsChange: a policy reloaded under the same name
// with other limits gets its own local state (the embedded store would
// refuse one name with two sets of limits).
func TestFailLocalAfterLimitsChange(t *testing.T) {
	f := newFake()
	f.setFail(errDown)
	tier := newTier(t, pingFake{batchFake{f}}, WithBreaker(1, time.Hour, time.Hour), WithFlapHorizon(0), withoutSyncLoop())
	ctx := context.Background()
	for _, n := range []int64{2, 3} {
		p := &core.Policy{Name: "reloaded", FailMode: core.FailLocal, Limits: []core.Limit{core.PerMinute(n)}}
		admitted := int64(0)
		for i := 0; i < 5; i++ {
			d, err := tier.Take(ctx, "k", p, t0, 1)
			require.Error(t, err)
			require.True(t, d.Degraded, "limit %d", n)
			assert.Equal(t, "reloaded", d.Policy)
			if d.Allowed {
				admitted++
			}
		}
		assert.Equal(t, n, admitted)
	}
}

// TestSyncFailuresOpenTheBreaker: failed sync rounds count towards the
// breaker, report their error, and keep the counts they could not forward.
func TestSyncFailuresOpenTheBreaker(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	ev := &events{}
	tier := newTier(t, pingFake{batchFake{f}}, WithClock(clk), WithSync(time.Hour), WithObserver(ev), WithBreaker(2, time.Second, time.Second), withoutProbeLoop())
	p := &core.Policy{Name: "cd", Algorithm: core.FixedWindow, CountDenied: true, Limits: []core.Limit{core.PerMinute(1)}}
	ctx := context.Background()
	for i := 0; i < 4; i++ { // 1 admitted, 1 remote denial, 2 cached
		_, err := tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
	}
	f.setFail(errDown)
	require.ErrorIs(t, tier.Sync(ctx), errDown)
	require.Equal(t, "closed", tier.BreakerState())
	require.ErrorIs(t, tier.Sync(ctx), errDown)
	require.Equal(t, "open", tier.BreakerState(), "two failed rounds in a row")
	syncs := ev.kinds(core.EventSync)
	require.Len(t, syncs, 2)
	assert.ErrorIs(t, syncs[1].Err, errDown)
	assert.Equal(t, 1, syncs[1].Keys)
	require.NoError(t, tier.Sync(ctx), "an open breaker skips the round")
	f.setFail(nil)
	clk.Advance(2 * time.Second)                // the cool-down and a probe interval
	_, err := tier.Take(ctx, "other", p, t0, 1) // the probe
	require.NoError(t, err)
	calls := f.calls.Load()
	require.NoError(t, tier.Sync(ctx))
	assert.Equal(t, calls+1, f.calls.Load(), "the kept count is forwarded once the remote store is back")
}
