package fleet

import (
	"context"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flapPattern says whether the remote store is down at a step of a
// flapping simulation.
type flapPattern struct {
	name string
	down func(step int) bool
}

// periodic is down for down steps, then up for up steps, from step 0.
func periodic(name string, down, up int) flapPattern {
	return flapPattern{name, func(s int) bool { return s%(down+up) < down }}
}

// randomPhases alternates down and up phases of 1 to max steps each,
// drawn from seed.
func randomPhases(name string, seed int64, max, steps int) flapPattern {
	rng := rand.New(rand.NewSource(seed))
	downAt := make([]bool, steps)
	for s, down := 0, true; s < steps; down = !down {
		n := 1 + rng.Intn(max)
		for i := 0; i < n && s < steps; i, s = i+1, s+1 {
			downAt[s] = down
		}
	}
	return flapPattern{name, func(s int) bool { return downAt[s] }}
}

// simulateFlap drives 4 tiers over one fake remote store on a manual
// clock, 10 ms a step for 20 s: at each step the remote store is down
// or up as pattern says, each tier (in an order drawn from seed) makes
// 0 to 4 requests for one hot key under a fixed window of 100 per
// second (FailLocal, fleet size 4), probes its open breakers, and every
// 10 steps syncs. It returns the admissions of each whole window,
// counted by the time each request was decided at.
func simulateFlap(t *testing.T, mode core.Mode, pattern flapPattern, seed int64, opts ...Option) []int64 {
	const tiers, limit, step, steps = 4, 100, 10 * time.Millisecond, 2000
	clk := core.NewManualClock(t0) // a whole second: windows start on steps
	remote := batchFake{newFake()}
	pol := core.Policy{Name: "flap", Mode: mode, Algorithm: core.FixedWindow, FailMode: core.FailLocal, FleetSize: tiers, Limits: []core.Limit{core.PerSecond(limit)}}
	var stores []*fleetStore
	var lims []*core.Limiter
	for range tiers {
		s := newTier(t, remote, append([]Option{WithClock(clk), WithSync(100 * time.Millisecond),
			withoutSyncLoop(), withoutProbeLoop(), withoutStarvationGrace()}, opts...)...)
		stores = append(stores, s)
		lims = append(lims, core.MustNewLimiter(s, pol, core.WithClock(clk), core.WithLogger(nil)))
	}
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	windows := make([]int64, steps*step/time.Second)
	for s := 0; s < steps; s++ {
		if pattern.down(s) {
			remote.setFail(errDown)
		} else {
			remote.setFail(nil)
		}
		for _, i := range rng.Perm(tiers) {
			for range rng.Intn(5) {
				if d, _ := lims[i].Allow(ctx, "hot"); d.Allowed {
					windows[clk.Now().Sub(t0)/time.Second]++
				}
			}
			stores[i].probeOpen()
			if s%10 == 9 {
				_ = stores[i].Sync(ctx)
			}
		}
		clk.Advance(step)
	}
	return windows
}

// flapPatterns are the simulated flaps: regular ones of several duty
// cycles and periods, and random phases of up to 100 ms and 1 s.
func flapPatterns() []flapPattern {
	return []flapPattern{
		periodic("100/100ms", 10, 10),
		periodic("300/100ms", 30, 10),
		periodic("50/250ms", 5, 25),
		periodic("700/300ms", 70, 30),
		randomPhases("random-100ms", 1, 10, 2000),
		randomPhases("random-1s", 2, 100, 2000),
		randomPhases("random-300ms", 3, 30, 2000),
		randomPhases("random-300ms-b", 4, 30, 2000),
	}
}

// TestFlappingStoreFailLocalBoundSim: FailLocal under a flapping remote
// store, simulated deterministically (a fake store failing and answering
// by a script, a manual clock, probes and syncs by hand, see
// simulateFlap): in exact and in write-back mode, no one-second window
// admits more than 1.3 × the limit (the flap share's bound is 1.25 L: the
// remote store's L, and at most a quarter of each tier's share from the
// tiers cut off). With the flap share off (WithFlapHorizon(0)) the
// random flaps admit more than 1.3 L in some window of each mode: the
// simulation reaches the case the flap share is for.
func TestFlappingStoreFailLocalBoundSim(t *testing.T) {
	const limit = 100
	for _, mode := range []core.Mode{core.ModeExact, core.ModeWriteBack} {
		t.Run(mode.String(), func(t *testing.T) {
			var worstOff int64
			for seed, pat := range flapPatterns() {
				ws := simulateFlap(t, mode, pat, int64(seed))
				t.Logf("%s: admitted per window %v", pat.name, ws)
				assert.LessOrEqual(t, slices.Max(ws), int64(limit*13/10), "%s: a window admitted more than 1.3 × the limit", pat.name)
				if !strings.HasPrefix(pat.name, "random-") {
					continue // the contrast needs only a few flaps
				}
				off := simulateFlap(t, mode, pat, int64(seed), WithFlapHorizon(0))
				t.Logf("%s, flap share off: %v", pat.name, off)
				worstOff = max(worstOff, slices.Max(off))
			}
			assert.Greater(t, worstOff, int64(limit*13/10), "without the flap share some window exceeds 1.3 × the limit")
		})
	}
}

// TestFlapShareAfterHorizon: the flap share holds while the remote store
// failed for less than the flap horizon (here the default, 10 s) and
// gives way to the full local share once every call has failed for that
// long: 4 tiers, a limit of 100 per second, the store down from the
// start: 6 per tier (a quarter of 25) in the first windows, 25 per tier
// once the store has failed for 10 s; an answer starts the horizon over;
// what the store admits is charged to the flap share.
func TestFlapShareAfterHorizon(t *testing.T) {
	const tiers = 4
	clk := core.NewManualClock(t0)
	remote := batchFake{newFake()}
	pol := core.Policy{Name: "horizon", Algorithm: core.FixedWindow, FailMode: core.FailLocal, FleetSize: tiers, Limits: []core.Limit{core.PerSecond(100)}}
	tier := newTier(t, remote, WithClock(clk), withoutSyncLoop(), withoutProbeLoop(), WithBreaker(1<<30, time.Second, 100*time.Millisecond))
	lim := core.MustNewLimiter(tier, pol, core.WithClock(clk), core.WithLogger(nil))
	ctx := context.Background()
	window := func() (admitted int) {
		for range 30 {
			if d, _ := lim.Allow(ctx, "k"); d.Allowed {
				admitted++
			}
		}
		return admitted
	}
	remote.setFail(errDown)
	assert.Equal(t, 6, window(), "the first window of an outage: the flap share")
	clk.Advance(defaultFlapHorizon - time.Second)
	assert.Equal(t, 6, window(), "still within the horizon")
	clk.Advance(time.Second)
	assert.Equal(t, 25, window(), "the store failed every call for the horizon: the full share")

	remote.setFail(nil)
	clk.Advance(time.Second)
	_, err := lim.Allow(ctx, "k") // answered: the horizon starts over
	require.NoError(t, err)
	remote.setFail(errDown)
	clk.Advance(time.Second)
	assert.Equal(t, 6, window(), "the store answered since: the flap share again")

	// remote admissions are charged to the flap share: 7 admitted by the
	// store leave no local admission in that window while it flaps
	remote.setFail(nil)
	clk.Advance(time.Second)
	for range 7 {
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed && !d.Degraded)
	}
	remote.setFail(errDown)
	assert.Equal(t, 0, window(), "the remote admissions spent the flap share")
	assert.Equal(t, max(2*time.Second+200*time.Millisecond, defaultFlapHorizon), tier.cfg.flapHorizon())

	_, err = newFleet(remote, WithFlapHorizon(-time.Second))
	require.ErrorContains(t, err, "WithFlapHorizon")
	long, err := newFleet(remote, WithBreaker(3, 10*time.Second, time.Second))
	require.NoError(t, err)
	defer long.Close()
	assert.Equal(t, 22*time.Second, long.cfg.flapHorizon(), "at least twice the cool-down and two probe intervals")
}

// TestFlappingRedisFailLocalBoundStop: 4 tiers × 4 goroutines, each
// tier with its own client, on one hot key under a fixed window of 100
// per second (FailLocal, fleet size 4), while a real Redis is stopped
// (SIGSTOP) for 100 ms every 200 ms: in exact and in write-back mode no
// window admits more than 1.3 × the limit. A decision is counted in the
// window it was made in: the limiter is given the time read before the
// call (AllowNAt), and its window is that time plus the decision's
// ResetAfter, rounded to the window's end (exact for local decisions,
// within the call's deadline for Redis's). Host load changes how many
// requests each phase sees, not the bound.
func TestFlappingRedisFailLocalBoundStop(t *testing.T) {
	const tiers, perTier, limit = 4, 4, 100
	srv := redistest.StartNode(t)
	for _, mode := range []core.Mode{core.ModeExact, core.ModeWriteBack} {
		t.Run(mode.String(), func(t *testing.T) {
			pol := core.Policy{Name: "flap-" + mode.String(), Mode: mode, Algorithm: core.FixedWindow, FailMode: core.FailLocal, FleetSize: tiers, Limits: []core.Limit{core.PerSecond(limit)}}
			var lims []*core.Limiter
			for range tiers {
				s := newTier(t, redisStore(t, srv.NewClient(t)), WithSync(100*time.Millisecond))
				lims = append(lims, core.MustNewLimiter(s, pol, core.WithLogger(nil)))
			}
			counts := &windowCounts{w: time.Second, n: map[int64]int64{}}
			start := time.Now()
			stop := start.Add(4500 * time.Millisecond)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the flapping
				defer wg.Done()
				defer srv.Resume()
				for time.Now().Before(stop) {
					srv.Pause()
					time.Sleep(100 * time.Millisecond)
					srv.Resume()
					time.Sleep(100 * time.Millisecond)
				}
			}()
			ctx := context.Background()
			hammer(&wg, tiers*perTier, stop, func(g int) {
				now := time.Now()
				if d, _ := lims[g%tiers].AllowNAt(ctx, "hot", now, 1); d.Allowed {
					end := now.Add(d.ResetAfter).Round(time.Second)
					counts.add(end.Add(-time.Nanosecond))
				}
			})
			wg.Wait()
			ws := counts.full(start, stop)
			t.Logf("%v: admitted per 1 s window (limit %d, %d tiers): %v", mode, limit, tiers, ws)
			require.GreaterOrEqual(t, len(ws), 3, "whole windows counted")
			assert.LessOrEqual(t, slices.Max(ws), int64(limit*13/10), "a window admitted more than 1.3 × the limit")
		})
	}
}

// TestVerbsKeepTheFlapShare: the verbs act on the flap share as on the
// local share while the store flaps (limit 40 per minute on a fleet of 2:
// share 20, flap share 5). A charge Redis took spends the flap share; a
// refund Redis took gives it back; a charge during the outage spends it
// and a refund during the outage gives it back; a reset restores it; a
// peek sees it.
func TestVerbsKeepTheFlapShare(t *testing.T) {
	f := verbFake{fake: newFake()}
	clk := core.NewManualClock(t0)
	tier := newTier(t, f, WithClock(clk), withoutSyncLoop(), withoutProbeLoop(), WithBreaker(1<<30, time.Hour, time.Hour))
	lim := core.MustNewLimiter(tier, core.Policy{Name: "verbs-flap", FailMode: core.FailLocal, FleetSize: 2, Limits: []core.Limit{core.PerMinute(40)}},
		core.WithClock(clk), core.WithLogger(nil))
	ctx := context.Background()
	peek := func() int64 {
		d, err := lim.PeekN(ctx, "u", 1)
		require.Error(t, err)
		require.True(t, d.Degraded)
		if !d.Allowed {
			return 0
		}
		return d.Remaining + 1
	}
	_, err := lim.Charge(ctx, "u", 3)
	require.NoError(t, err)
	f.setFail(errDown)
	assert.Equal(t, int64(2), peek(), "the charge Redis took spent 3 of the flap share of 5")
	f.setFail(nil)
	_, err = lim.Refund(ctx, "u", 3)
	require.NoError(t, err)
	f.setFail(errDown)
	assert.Equal(t, int64(5), peek(), "the refund Redis took gave them back")
	d, err := lim.Charge(ctx, "u", 4)
	require.Error(t, err)
	require.True(t, d.Degraded)
	assert.Equal(t, int64(1), peek(), "a charge during the outage spent the flap share")
	_, err = lim.Refund(ctx, "u", 2)
	require.Error(t, err)
	assert.Equal(t, int64(3), peek(), "a refund during the outage gave to it")
	require.Error(t, lim.Reset(ctx, "u"))
	assert.Equal(t, int64(5), peek(), "a reset restored it")
}
