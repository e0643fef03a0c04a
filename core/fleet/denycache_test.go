package fleet

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDenyCacheServesRepeatedDenials(t *testing.T) {
	f := newFake()
	ev := &events{}
	tier := newTier(t, batchFake{f}, WithObserver(ev))
	p := &core.Policy{Name: "p", Limits: []core.Limit{core.Per(2, time.Second)}}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		d, err := tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	first, err := tier.Take(ctx, "k", p, t0, 1)
	require.NoError(t, err)
	require.False(t, first.Allowed)
	require.False(t, first.Cached, "the remote store's own denial")
	require.Equal(t, 500*time.Millisecond, first.RetryAfter)
	calls := f.calls.Load()
	now := t0
	for i := 0; i < 100; i++ {
		now = now.Add(time.Millisecond)
		d, err := tier.Take(ctx, "k", p, now, 1)
		require.NoError(t, err)
		want := f.peek("k", p, now, 1)
		want.Cached = true // the only difference: it says where it came from
		require.Equal(t, want, d, "a cached denial is the exact store's decision")
	}
	assert.Equal(t, calls, f.calls.Load(), "denials served without a round trip")
	assert.Len(t, ev.kinds(core.EventDenyCacheHit), 100)
	// another cost, another key, or the time the denial ends: remote again
	for _, c := range []struct {
		key  string
		at   time.Time
		cost int64
	}{{"k", now, 2}, {"other", now, 1}, {"k", t0.Add(500 * time.Millisecond), 1}} {
		before := f.calls.Load()
		_, err := tier.Take(ctx, c.key, p, c.at, c.cost)
		require.NoError(t, err)
		assert.Equal(t, before+1, f.calls.Load(), "%+v", c)
	}
}

// TestDenyCacheNeverAdmitsExtra: four tiers share one remote store and
// take turns at random for every policy of the conformance suite. Every
// denial a tier serves from its cache is one the remote store would give
// at that instant too (peeked without consuming): other servers'
// consumption only makes a denial last longer.
func TestDenyCacheNeverAdmitsExtra(t *testing.T) {
	for _, p := range conformkit.Policies() {
		t.Run(p.Name, func(t *testing.T) {
			f := newFake()
			tiers := make([]*fleetStore, 4)
			for i := range tiers {
				tiers[i] = newTier(t, batchFake{f})
			}
			rng := rand.New(rand.NewPCG(uint64(len(p.Name)), 3))
			now := t0
			ctx := context.Background()
			hits := 0
			for i := 0; i < 3000; i++ {
				if rng.IntN(3) == 0 {
					now = now.Add(time.Duration(rng.IntN(150)) * time.Millisecond)
				}
				key := []string{"a", "b"}[rng.IntN(2)]
				cost := int64(1 + rng.IntN(2))
				before := f.calls.Load()
				want := f.peek(key, &p, now, cost)
				d, err := tiers[rng.IntN(len(tiers))].Take(ctx, key, &p, now, cost)
				require.NoError(t, err)
				if f.calls.Load() == before {
					hits++
					require.False(t, d.Allowed && !d.Shadowed, "step %d", i)
					require.False(t, want.Allowed && !want.Shadowed, "step %d: the cache denied what the store admits", i)
					require.LessOrEqual(t, d.RetryAfter, want.RetryAfter, "step %d", i)
				}
			}
			if p.CountDenied {
				assert.Zero(t, hits, "exact mode sends every CountDenied request to the store")
			} else {
				assert.Positive(t, hits)
			}
		})
	}
}

// TestCountDeniedForwarded: in write-back mode a CountDenied policy's
// cached denials are counted at the next sync round (one batched take of
// their summed cost), and before the key next goes to the remote store.
func TestCountDeniedForwarded(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	tier := newTier(t, batchFake{f}, WithClock(clk), WithSync(time.Second), WithMaxLease(0))
	p := &core.Policy{Name: "cd", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.Per(4, time.Minute)}}
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		_, err := tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
	}
	calls := f.calls.Load()
	for i := 0; i < 3; i++ {
		d, err := tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
		require.False(t, d.Allowed)
	}
	require.Equal(t, calls, f.calls.Load(), "served from the cache")
	// the log holds 4 admitted + 1 counted denial at t0; the 3 cached
	// denials land with the sync, stamped at its time
	clk.Advance(10 * time.Second)
	batches := f.batches.Load()
	require.NoError(t, tier.Sync(ctx))
	assert.Equal(t, batches+1, f.batches.Load(), "one round trip")
	assert.Equal(t, calls+1, f.calls.Load(), "one take of the summed cost")
	// at t0+1m the t0 stamps have left; the three forwarded at t0+10s have not
	at := t0.Add(time.Minute)
	assert.Equal(t, int64(1), f.peek("k", p, at, 0).Remaining)
	require.NoError(t, tier.Sync(ctx))
	assert.Equal(t, calls+1, f.calls.Load(), "nothing left to forward")
}

// TestCountDeniedFlushedBeforeRemote: pending counted denials reach the
// remote store before the key's next remote decision, in the same round
// trip.
func TestCountDeniedFlushedBeforeRemote(t *testing.T) {
	f := newFake()
	tier := newTier(t, batchFake{f}, WithSync(time.Hour), WithMaxLease(0))
	p := &core.Policy{Name: "cd", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.Per(3, time.Second)}}
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		_, err := tier.Take(ctx, "k", p, t0, 2) // 1 admitted, 1 counted denial, 4 cached
		require.NoError(t, err)
	}
	batches, calls := f.batches.Load(), f.calls.Load()
	d, err := tier.Take(ctx, "k", p, t0, 1) // a smaller cost goes remote
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, batches+1, f.batches.Load(), "forward and decision in one batch")
	assert.Equal(t, calls+2, f.calls.Load())
}

// TestDeferredDenialCountsInExactMode: with WithDeferredDenialCounts an
// exact-mode CountDenied policy is served from the deny cache and its
// denials are counted at the next sync.
func TestDeferredDenialCountsInExactMode(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	tier := newTier(t, batchFake{f}, WithClock(clk), WithDeferredDenialCounts())
	p := &core.Policy{Name: "cd", Algorithm: core.GCRA, CountDenied: true, Limits: []core.Limit{core.Per(2, time.Minute)}}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
	}
	calls := f.calls.Load()
	for i := 0; i < 50; i++ {
		d, err := tier.Take(ctx, "k", p, t0.Add(500*time.Millisecond), 1)
		require.NoError(t, err)
		require.False(t, d.Allowed)
	}
	assert.Equal(t, calls, f.calls.Load(), "served from the cache")
	clk.Advance(30 * time.Second)
	require.NoError(t, tier.Sync(ctx))
	assert.Equal(t, calls+1, f.calls.Load(), "counted in one take at the sync")
	// GCRA counts denials up to an empty bucket at the sync instant
	// (t0+30s), so the lock-out lasts a full bucket from there: denied at
	// t0+59s, where counting at t0+1s would have admitted.
	assert.False(t, f.peek("k", p, t0.Add(59*time.Second), 1).Allowed)
	assert.True(t, f.peek("k", p, t0.Add(60*time.Second), 1).Allowed)
}
