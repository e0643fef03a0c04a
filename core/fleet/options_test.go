package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRejectsBadConfiguration(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	tier := newTier(t, newFake())
	for name, c := range map[string]struct {
		remote core.Store
		opts   []Option
		want   string
	}{
		"nil remote":      {nil, nil, "nil remote"},
		"embedded remote": {ms, nil, "embedded store"},
		"tier remote":     {tier, nil, "already a fleet tier"},
		"nil option":      {newFake(), []Option{nil}, "nil Option"},
		"negative sync":   {newFake(), []Option{WithSync(-time.Second)}, "WithSync"},
		"huge sync":       {newFake(), []Option{WithSync(2 * time.Hour)}, "WithSync"},
		"bad mode":        {newFake(), []Option{WithDefaultMode(core.ModeDefault)}, "WithDefaultMode"},
		"negative lease":  {newFake(), []Option{WithMaxLease(-1)}, "WithMaxLease"},
		"tiny table":      {newFake(), []Option{WithMaxKeys(3)}, "WithMaxKeys"},
		"zero threshold":  {newFake(), []Option{WithBreaker(0, time.Second, time.Second)}, "WithBreaker"},
		"zero cool-down":  {newFake(), []Option{WithBreaker(1, 0, time.Second)}, "WithBreaker"},
		"zero probe":      {newFake(), []Option{WithBreaker(1, time.Second, 0)}, "WithBreaker"},
		"zero fleet":      {newFake(), []Option{WithFleetSize(0)}, "WithFleetSize"},
		"nil clock":       {newFake(), []Option{WithClock(nil)}, "WithClock"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := newFleet(c.remote, c.opts...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestDefaults(t *testing.T) {
	tier := newTier(t, newFake())
	assert.Equal(t, core.ModeExact, tier.cfg.mode, "exact unless WithSync > 0")
	assert.Equal(t, int64(defaultMaxLease), tier.cfg.maxLease)
	assert.Equal(t, defaultMaxKeys, tier.cfg.maxKeys)
	assert.Equal(t, defaultBreakerThreshold, tier.cfg.threshold)
	assert.Equal(t, defaultCoolDown, tier.cfg.coolDown)
	assert.Equal(t, defaultProbeInterval, tier.cfg.probe)
	assert.Equal(t, defaultFleetSize, tier.cfg.fleetSize)
	assert.True(t, tier.FallsBackLocally())
	assert.Equal(t, "closed", tier.BreakerState())

	wb := newTier(t, newFake(), WithSync(time.Second))
	assert.Equal(t, core.ModeWriteBack, wb.cfg.mode)
	p := &core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(4000)}}
	pi, err := wb.info(p)
	require.NoError(t, err)
	assert.True(t, pi.writeBack)
	assert.Equal(t, int64(1000), pi.leaseCap, "a quarter of the limit over fleet size 1, below defaultMaxLease")
	assert.Equal(t, time.Second.Microseconds(), pi.syncUs)
	exact := &core.Policy{Name: "e", Mode: core.ModeExact, Limits: []core.Limit{core.PerMinute(4000)}}
	pi, err = wb.info(exact)
	require.NoError(t, err)
	assert.False(t, pi.writeBack, "the policy's mode wins")
	own := &core.Policy{Name: "o", Mode: core.ModeWriteBack, FleetSize: 10, Limits: []core.Limit{core.PerMinute(4000)}}
	pi, err = tier.info(own)
	require.NoError(t, err)
	assert.True(t, pi.writeBack)
	assert.Equal(t, defaultWriteBackSync.Microseconds(), pi.syncUs, "write-back with no interval anywhere")
	assert.Equal(t, int64(100), pi.leaseCap, "4000 / (4 × 10)")
	assert.Equal(t, core.PerMinute(400), pi.local.Limits[0], "FailLocal divides by the policy's fleet size")
}

func TestTakeErrorsAndClose(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	tier, err := newFleet(batchFake{f}, WithClock(clk), WithSync(time.Hour))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = tier.Take(ctx, "k", nil, t0, 1)
	require.Error(t, err)
	_, err = tier.Take(ctx, "k", &core.Policy{Name: "bad"}, t0, 1)
	require.Error(t, err, "an invalid policy")
	p := &core.Policy{Name: "cd", Algorithm: core.GCRA, CountDenied: true, Limits: []core.Limit{core.Per(1, time.Minute)}}
	for i := 0; i < 5; i++ {
		_, err := tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
	}
	calls := f.calls.Load()
	require.NoError(t, tier.Close())
	assert.Equal(t, calls+1, f.calls.Load(), "Close forwards the pending counted denials")
	require.NoError(t, tier.Close())
	_, err = tier.Take(ctx, "k", p, t0, 1)
	assert.ErrorIs(t, err, core.ErrClosed)
}

// TestHybridChecksThroughTheTier: AllowAll over two limiters sharing one
// tier decides as over the remote store, and the deny cache answers the
// second time.
func TestHybridChecksThroughTheTier(t *testing.T) {
	f := newFake()
	tier := newTier(t, batchFake{f})
	clk := core.NewManualClock(t0)
	user := core.MustNewLimiter(tier, core.Policy{Name: "user", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clk))
	ip := core.MustNewLimiter(tier, core.Policy{Name: "ip", Limits: []core.Limit{core.PerMinute(5)}}, core.WithClock(clk))
	ctx := context.Background()
	var allowed int
	for i := 0; i < 6; i++ {
		d, err := core.AllowAll(ctx, core.Check{Limiter: user, Key: "u", Cost: 1}, core.Check{Limiter: ip, Key: "1.2.3.4", Cost: 1})
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		} else {
			assert.Equal(t, "user", d.Policy)
		}
	}
	assert.Equal(t, 2, allowed)
	assert.Equal(t, int64(2*2+1), f.calls.Load(), "two admitted checks of two limiters, one remote denial, then the cache")
}

// TestBoundsAreCores: the tier's bounds of its default sync and fleet
// size (maxSync, maxFleetSize) are core's bounds of a policy's: core
// accepts each bound and refuses one more.
func TestBoundsAreCores(t *testing.T) {
	validate := func(set func(*core.Policy)) error {
		p := core.Policy{Name: "p", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(10)}}
		set(&p)
		return p.Validate()
	}
	assert.NoError(t, validate(func(p *core.Policy) { p.Sync = maxSync }))
	assert.Error(t, validate(func(p *core.Policy) { p.Sync = maxSync + 1 }))
	assert.NoError(t, validate(func(p *core.Policy) { p.FleetSize = maxFleetSize }))
	assert.Error(t, validate(func(p *core.Policy) { p.FleetSize = maxFleetSize + 1 }))
}

// TestDenyCacheTTLZeroTurnsItOff: WithDenyCacheTTL(0) is the tier
// without a deny cache; any other bound keeps it.
func TestDenyCacheTTLZeroTurnsItOff(t *testing.T) {
	p := &core.Policy{Name: "p", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(1)}}
	for ttl, want := range map[time.Duration]bool{0: false, time.Second: true} {
		tier := newTier(t, newFake(), WithDenyCacheTTL(ttl))
		pi, err := tier.info(p)
		require.NoError(t, err)
		assert.Equal(t, want, pi.denyCache, "WithDenyCacheTTL(%v)", ttl)
	}
}
