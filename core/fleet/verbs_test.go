package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

// sharedMem is an embedded store posing as a remote one: what four tiers
// share in these tests (it implements the verbs and Reserve).
type sharedMem struct{ *memstore.Store }

func (sharedMem) Local() bool { return false }

// TestResetHonouredFleetWide: a key exhausted and denied on four tiers
// (each caches the denial, RetryAfter 6 s) and reset through one is
// admitted at once there, and on every other tier within the deny
// cache's bound, not after the cached RetryAfter.
func TestResetHonouredFleetWide(t *testing.T) {
	for _, ttl := range []time.Duration{0, 200 * time.Millisecond} {
		bound := DefaultDenyCacheTTL
		var opts []Option
		if ttl > 0 {
			bound, opts = ttl, append(opts, WithDenyCacheTTL(ttl))
		}
		remote := sharedMem{memstore.MustNew()}
		clk := core.NewManualClock(t0)
		p := core.Policy{Name: "r", Limits: []core.Limit{core.PerMinute(10)}}
		var ls []*core.Limiter
		for range 4 {
			tier := newTier(t, remote, opts...)
			ls = append(ls, core.MustNewLimiter(tier, p, core.WithClock(clk)))
		}
		ctx := context.Background()
		for range 10 {
			d, err := ls[0].Allow(ctx, "u")
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		for _, l := range ls {
			d, err := l.Allow(ctx, "u")
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.Equal(t, 6*time.Second, d.RetryAfter)
		}
		require.NoError(t, ls[0].Reset(ctx, "u"))
		d, err := ls[0].Allow(ctx, "u")
		require.NoError(t, err)
		assert.True(t, d.Allowed, "the tier that reset admits at once")
		clk.Advance(bound - time.Millisecond)
		d, err = ls[1].Allow(ctx, "u")
		require.NoError(t, err)
		assert.False(t, d.Allowed, "another tier's cached denial stands within the bound")
		clk.Advance(time.Millisecond)
		for i, l := range ls[1:] {
			d, err := l.Allow(ctx, "u")
			require.NoError(t, err)
			assert.True(t, d.Allowed, "tier %d honours the reset within %v", i+1, bound)
		}
		remote.Close()
	}
}

// TestVerbsThroughTier: the verbs reach the remote store, a peek
// consumes nothing, a refund drops the tier's cached denial.
func TestVerbsThroughTier(t *testing.T) {
	remote := sharedMem{memstore.MustNew()}
	defer remote.Close()
	clk := core.NewManualClock(t0)
	l := core.MustNewLimiter(newTier(t, remote), core.Policy{Name: "v", Limits: []core.Limit{core.PerMinute(10)}}, core.WithClock(clk))
	ctx := context.Background()
	d, err := l.Charge(ctx, "u", 12)
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, 18*time.Second, d.RetryAfter, "2 owed, then one more")
	d, err = l.Allow(ctx, "u")
	require.NoError(t, err)
	assert.False(t, d.Allowed) // cached
	d, err = l.Peek(ctx, "u")
	require.NoError(t, err)
	assert.Equal(t, 18*time.Second, d.RetryAfter, "a peek consumed nothing")
	d, err = l.Refund(ctx, "u", 5)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	d, err = l.Allow(ctx, "u")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "the refund dropped the cached denial")
	require.NoError(t, l.Wait(ctx, "u"))

	_, err = New(remote, WithDenyCacheTTL(0))
	require.ErrorContains(t, err, "WithDenyCacheTTL")
}

// TestVerbsRemoteWithoutVerbs: a remote store without the verbs makes
// them fail with core.ErrUnsupported.
func TestVerbsRemoteWithoutVerbs(t *testing.T) {
	tier := newTier(t, newFake())
	p := &core.Policy{Name: "x", Limits: []core.Limit{core.PerSecond(1)}}
	_, err := tier.Peek(context.Background(), "k", p, t0, 1)
	require.ErrorIs(t, err, core.ErrUnsupported)
	require.ErrorIs(t, tier.Reset(context.Background(), "k", p), core.ErrUnsupported)
}

// TestResetFleetOverRedis: four tiers, each with its own client to one
// Redis node (client time, a manual clock), write-back mode with leases:
// a key exhausted everywhere and reset through one tier is admitted on
// every tier within the deny cache's bound, and the tier that reset does
// not spend a lease charged before the reset.
func TestResetFleetOverRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	clk := core.NewManualClock(time.Now())
	p := core.Policy{Name: "fleet-reset", Limits: []core.Limit{core.PerMinute(40)}}
	var ls []*core.Limiter
	for range 4 {
		tier := newTier(t, redisStore(t, srv.NewClient(t)), WithSync(time.Minute), withoutSyncLoop(), WithDenyCacheTTL(300*time.Millisecond))
		ls = append(ls, core.MustNewLimiter(tier, p, core.WithClock(clk), core.WithTimeout(5*time.Second)))
	}
	ctx := context.Background()
	admitted := 0
	for i := 0; i < 80; i++ {
		if d, err := ls[i%4].Allow(ctx, "u"); err == nil && d.Allowed {
			admitted++
		}
	}
	require.LessOrEqual(t, admitted, 40)
	require.NoError(t, ls[0].Reset(ctx, "u"))
	d, err := ls[0].Peek(ctx, "u")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	clk.Advance(300 * time.Millisecond)
	for i, l := range ls {
		d, err := l.Allow(ctx, "u")
		require.NoError(t, err)
		require.True(t, d.Allowed, "tier %d admits within the deny cache's bound after the reset", i)
	}
}
