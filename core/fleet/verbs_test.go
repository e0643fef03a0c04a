package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/internal/redistest"
)

// sharedMem is an embedded store posing as a remote one: what four tiers
// share in these tests (it implements the verbs and Reserve).
type sharedMem struct{ fullMem }

func (sharedMem) Local() bool { return false }

// TestResetHonouredFleetWide: a key exhausted and denied on four tiers
// (each caches the denial, RetryAfter 6 s) and reset through one is
// admitted at once there, and on every other tier within the deny
// cache's bound, not after the cached RetryAfter.
func TestResetHonouredFleetWide(t *testing.T) {
	for _, ttl := range []time.Duration{0, 200 * time.Millisecond} {
		bound := defaultDenyCacheTTL
		var opts []Option
		if ttl > 0 {
			bound, opts = ttl, append(opts, WithDenyCacheTTL(ttl))
		}
		remote := sharedMem{mustMem()}
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
	remote := sharedMem{mustMem()}
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
	d, err = l.PeekN(ctx, "u", 1)
	require.NoError(t, err)
	assert.Equal(t, 18*time.Second, d.RetryAfter, "a peek consumed nothing")
	d, err = l.Refund(ctx, "u", 5)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	d, err = l.Allow(ctx, "u")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "the refund dropped the cached denial")
	require.NoError(t, l.Wait(ctx, "u"))

	_, err = newFleet(remote, WithDenyCacheTTL(-1))
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
// not spend a lease charged before the reset: it holds leased units when
// it resets, and its next admission is counted at Redis (a peek's
// remaining drops from 39 to 38; spending the old lease would leave it at
// 39).
func TestResetFleetOverRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	clk := core.NewManualClock(time.Now())
	p := core.Policy{Name: "fleet-reset", Limits: []core.Limit{core.PerMinute(40)}}
	var ls []*core.Limiter
	var tiers []*fleetStore
	for range 4 {
		tier := newTier(t, redisStore(t, srv.NewClient(t)), WithSync(time.Minute), withoutSyncLoop(), WithDenyCacheTTL(300*time.Millisecond))
		tiers = append(tiers, tier)
		ls = append(ls, core.MustNewLimiter(tier, p, core.WithClock(clk), core.WithTimeout(5*time.Second)))
	}
	ctx := context.Background()
	admitted := 0
	// tier 0's first request loads the key, its second leases 2 units
	// (one spent at once), its third spends one: it still holds one
	for range 3 {
		if d, err := ls[0].Allow(ctx, "u"); err == nil && d.Allowed {
			admitted++
		}
	}
	require.Positive(t, leaseOf(tiers[0], "u", ls[0].Policy()), "tier 0 holds a lease")
	for i := 0; i < 80; i++ {
		if d, err := ls[1+i%3].Allow(ctx, "u"); err == nil && d.Allowed {
			admitted++
		}
	}
	require.LessOrEqual(t, admitted, 40)
	require.NoError(t, ls[0].Reset(ctx, "u"))
	d, err := ls[0].PeekN(ctx, "u", 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, int64(39), d.Remaining, "Redis reset the key (a peek of 1 leaves 39)")
	d, err = ls[0].Allow(ctx, "u")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = ls[0].PeekN(ctx, "u", 1)
	require.NoError(t, err)
	assert.Equal(t, int64(38), d.Remaining, "the admission after the reset was counted at Redis, not spent from the old lease")
	clk.Advance(300 * time.Millisecond)
	for i, l := range ls {
		d, err := l.Allow(ctx, "u")
		require.NoError(t, err)
		require.True(t, d.Allowed, "tier %d admits within the deny cache's bound after the reset", i)
	}
}

// verbFake is the fake with the verbs and Reserve (core's model), failing
// and hanging as the fake does and counting its calls with the takes'.
// With downPrefix set it is a storekit.DomainStore whose domain is a key's
// first byte, and only the keys starting with downPrefix fail (errDown).
type verbFake struct {
	*fake
	downPrefix string
}

func (f verbFake) err(ctx context.Context, key string) error {
	f.calls.Add(1)
	if f.downPrefix != "" {
		if strings.HasPrefix(key, f.downPrefix) {
			return errDown
		}
		return nil
	}
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if e := f.fail.Load(); e != nil {
		return *e
	}
	return nil
}

// apply runs a verb of core's model on key's state, unless the call fails.
func (f verbFake) apply(ctx context.Context, key string, p *core.Policy, v byte, now time.Time, cost, maxWait int64) (core.Decision, error) {
	if err := f.err(ctx, key); err != nil {
		return core.Decision{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, c := f.st(p, key)
	return conformkit.ApplyVerb(c, st, v, now.UnixMicro(), cost, maxWait), nil
}

func (f verbFake) Peek(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return f.apply(ctx, key, p, 'P', now, cost, 0)
}

func (f verbFake) Reset(ctx context.Context, key string, p *core.Policy) error {
	_, err := f.apply(ctx, key, p, 'X', time.Time{}, 0, 0)
	return err
}

func (f verbFake) Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return f.apply(ctx, key, p, 'C', now, cost, 0)
}

func (f verbFake) Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return f.apply(ctx, key, p, 'R', now, cost, 0)
}

func (f verbFake) Reserve(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64, maxWait time.Duration) (core.Decision, error) {
	return f.apply(ctx, key, p, 'W', now, cost, maxWait.Microseconds())
}

// domainVerbFake is a verbFake with failure domains (see downPrefix).
type domainVerbFake struct{ verbFake }

func (domainVerbFake) Domain(key string, _ *core.Policy) string { return key[:1] }

// TestVerbsThroughBreaker: the verbs go through the breaker as decisions
// do: their outages open it, while it is open they never call the remote
// store and fail at once (core.ErrCircuitOpen), the fail mode decides
// (FailClosed denies a peek; FailLocal peeks, charges and refunds the
// key's local share, and a charge made during the outage reaches the
// remote store once it is back), and a verb after the cool-down is the
// probe that closes it.
func TestVerbsThroughBreaker(t *testing.T) {
	f := verbFake{fake: newFake()}
	clk := core.NewManualClock(t0)
	tier := newTier(t, f, WithClock(clk), WithBreaker(3, time.Second, 100*time.Millisecond), withoutSyncLoop(), WithFlapHorizon(0), withoutProbeLoop())
	ctx := context.Background()
	lim := func(p core.Policy) *core.Limiter {
		return core.MustNewLimiter(tier, p, core.WithClock(clk), core.WithLogger(nil))
	}
	closed := lim(core.Policy{Name: "closed", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(10)}})
	local := lim(core.Policy{Name: "local", FailMode: core.FailLocal, FleetSize: 2, Limits: []core.Limit{core.PerMinute(10)}})

	_, err := local.Charge(ctx, "u", 1)
	require.NoError(t, err)
	f.setFail(errDown)
	for _, call := range []func() error{
		func() error { _, err := closed.PeekN(ctx, "u", 1); return err },
		func() error { _, err := closed.Charge(ctx, "u", 1); return err },
		func() error { return closed.Reset(ctx, "u") },
	} {
		require.Equal(t, "closed", tier.BreakerState())
		require.ErrorIs(t, call(), errDown)
	}
	require.Equal(t, "open", tier.BreakerState(), "three verbs' outages open the breaker")

	calls := f.calls.Load()
	var se *core.StoreError
	d, err := closed.PeekN(ctx, "u", 1)
	require.ErrorIs(t, err, core.ErrCircuitOpen)
	require.ErrorAs(t, err, &se)
	assert.True(t, d.Degraded && !d.Allowed, "FailClosed denies a peek")
	require.ErrorIs(t, closed.Wait(ctx, "u"), core.ErrCircuitOpen, "FailClosed ends a wait")

	// FailLocal: the key's share of 10 / 2, of which the remote charge
	// took 1
	d, err = local.Charge(ctx, "u", 3)
	require.ErrorIs(t, err, core.ErrCircuitOpen)
	assert.True(t, d.Degraded)
	assert.Equal(t, int64(1), d.Remaining, "charged to the local share of 5")
	d, err = local.Refund(ctx, "u", 1)
	require.ErrorIs(t, err, core.ErrCircuitOpen)
	assert.Equal(t, int64(2), d.Remaining)
	d, err = local.PeekN(ctx, "u", 2)
	require.ErrorIs(t, err, core.ErrCircuitOpen)
	assert.True(t, d.Degraded && d.Allowed)
	assert.Equal(t, int64(0), d.Remaining)
	d, err = local.PeekN(ctx, "u", 3)
	require.ErrorIs(t, err, core.ErrCircuitOpen)
	assert.True(t, d.Degraded && !d.Allowed)
	require.NoError(t, local.Wait(ctx, "u"), "the fallback admits a waiter")
	require.ErrorIs(t, local.Reset(ctx, "w"), core.ErrCircuitOpen)
	assert.Equal(t, calls, f.calls.Load(), "an open breaker never calls the remote store")

	// after the cool-down and a probe interval a verb is the probe
	clk.Advance(time.Second + 100*time.Millisecond)
	f.setFail(nil)
	d, err = local.PeekN(ctx, "u", 1)
	require.NoError(t, err)
	assert.False(t, d.Degraded)
	require.Equal(t, "closed", tier.BreakerState())
	assert.Equal(t, int64(8), d.Remaining, "the remote store saw only the first charge (and the peek's 1)")
	require.NoError(t, tier.Sync(ctx))
	d, err = local.PeekN(ctx, "u", 1)
	require.NoError(t, err)
	assert.Equal(t, int64(5), d.Remaining, "the outage's charge (2 net of the refund) and admission (1) were forwarded")
}

// TestVerbsCallerCancelled: a verb whose caller cancelled its context is
// not an outage (the breaker stays closed) and gets no fallback decision.
func TestVerbsCallerCancelled(t *testing.T) {
	f := verbFake{fake: newFake()}
	tier := newTier(t, f, WithBreaker(2, time.Minute, time.Minute))
	p := &core.Policy{Name: "c", FailMode: core.FailLocal, Limits: []core.Limit{core.PerMinute(10)}}
	f.hang.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		d, err := tier.Charge(ctx, "u", p, t0, 1)
		require.ErrorIs(t, err, context.Canceled)
		assert.False(t, d.Degraded, "no fallback for the caller's own cancellation")
		_, err = tier.Peek(ctx, "u", p, t0, 1)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, tier.Reset(ctx, "u", p), context.Canceled)
	}
	assert.Equal(t, "closed", tier.BreakerState())
}

// TestVerbsPerDomain: a failing domain's verbs open only its own
// breaker; the keys of the other domains keep reaching the remote store.
func TestVerbsPerDomain(t *testing.T) {
	f := domainVerbFake{verbFake{fake: newFake(), downPrefix: "a"}}
	tier := newTier(t, f, WithBreaker(2, time.Minute, time.Minute))
	p := &core.Policy{Name: "d", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(10)}}
	ctx := context.Background()
	for range 2 {
		_, err := tier.Charge(ctx, "a1", p, t0, 1)
		require.ErrorIs(t, err, errDown)
	}
	assert.Equal(t, map[string]string{"": "closed", "a": "open"}, tier.BreakerStates())
	_, err := tier.Peek(ctx, "a2", p, t0, 1)
	require.ErrorIs(t, err, core.ErrCircuitOpen, "another key of the failed domain")
	for _, k := range []string{"b1", "c1"} {
		d, err := tier.Charge(ctx, k, p, t0, 4)
		require.NoError(t, err)
		assert.Equal(t, int64(6), d.Remaining)
		_, err = tier.Reserve(ctx, k, p, t0, 1, time.Second)
		require.NoError(t, err)
		require.NoError(t, tier.Reset(ctx, k, p))
	}
	assert.Equal(t, "open", tier.BreakerStates()["a"])
	assert.Equal(t, "closed", tier.BreakerStates()["b"])
}

// TestVerbsDeadRedis: over a Redis node that was killed, the verbs fail
// to the policy's fail mode, their connection failures open the breaker,
// and once it is open no verb sends Redis a command; on a Cluster with
// one master killed, only that master's breaker opens and the other
// masters' keys keep being served by Redis.
func TestVerbsDeadRedis(t *testing.T) {
	ctx := context.Background()
	t.Run("node", func(t *testing.T) {
		srv := redistest.StartNode(t)
		c := srv.NewClient(t)
		cnt := &cmdCounter{}
		c.AddHook(cnt)
		tier := newTier(t, redisStore(t, c), WithBreaker(3, time.Minute, time.Minute), WithFlapHorizon(0))
		lim := func(p core.Policy) *core.Limiter {
			return core.MustNewLimiter(tier, p, core.WithTimeout(5*time.Second), core.WithLogger(nil))
		}
		closed := lim(core.Policy{Name: "closed", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(10)}})
		local := lim(core.Policy{Name: "local", FailMode: core.FailLocal, FleetSize: 2, Limits: []core.Limit{core.PerMinute(10)}})
		_, err := local.Charge(ctx, "u", 2)
		require.NoError(t, err)
		srv.Kill()
		var se *core.StoreError
		for i := 0; tier.BreakerState() != "open"; i++ {
			require.Less(t, i, 3, "three outages open the breaker")
			_, err := closed.Charge(ctx, "u", 1)
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "connection", core.ClassifyError(err), "%v", err)
		}
		sent := cnt.n.Load()
		d, err := closed.PeekN(ctx, "u", 1)
		require.ErrorIs(t, err, core.ErrCircuitOpen)
		assert.True(t, d.Degraded && !d.Allowed, "FailClosed denies")
		require.ErrorIs(t, closed.Wait(ctx, "u"), core.ErrCircuitOpen)
		d, err = local.Charge(ctx, "u", 2)
		require.ErrorIs(t, err, core.ErrCircuitOpen)
		assert.True(t, d.Degraded)
		assert.Equal(t, int64(1), d.Remaining, "the local share of 5, less the 2 charged at Redis and these 2")
		require.NoError(t, local.Wait(ctx, "u"), "the local share admits a waiter")
		d, err = local.PeekN(ctx, "u", 1)
		require.ErrorIs(t, err, core.ErrCircuitOpen)
		assert.True(t, d.Degraded && !d.Allowed, "the local share is spent")
		require.ErrorIs(t, local.Reset(ctx, "u"), core.ErrCircuitOpen)
		d, err = local.PeekN(ctx, "u", 1)
		require.ErrorIs(t, err, core.ErrCircuitOpen)
		assert.True(t, d.Degraded && d.Allowed, "the reset reached the local share")
		assert.Equal(t, sent, cnt.n.Load(), "no command while the breaker is open")
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		rs := redisStore(t, cl.NewClient(t))
		tier := newTier(t, rs, WithBreaker(2, time.Minute, time.Minute))
		lim := core.MustNewLimiter(tier, core.Policy{Name: "dom", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(10)}},
			core.WithTimeout(5*time.Second), core.WithLogger(nil))
		victim := cl.Nodes[0].Addr
		var vkey, hkey string
		for i := 0; vkey == "" || hkey == ""; i++ {
			require.Less(t, i, 1000)
			k := fmt.Sprint("user-", i)
			_, err := lim.Charge(ctx, k, 1) // loads the slot map
			require.NoError(t, err)
			switch rs.Domain(k, lim.Policy()) {
			case victim:
				vkey = k
			case "":
				t.Fatalf("no domain for %s", k)
			default:
				hkey = k
			}
		}
		cl.Nodes[0].Kill()
		for range 2 {
			_, err := lim.Charge(ctx, vkey, 1)
			require.Error(t, err)
		}
		require.Equal(t, "open", tier.BreakerStates()[victim], "the dead master's breaker")
		_, err := lim.PeekN(ctx, vkey, 1)
		require.ErrorIs(t, err, core.ErrCircuitOpen)
		d, err := lim.Charge(ctx, hkey, 3)
		require.NoError(t, err, "another master's key is served by Redis")
		assert.False(t, d.Degraded)
		assert.Equal(t, int64(6), d.Remaining)
		d, err = lim.Refund(ctx, hkey, 1)
		require.NoError(t, err)
		assert.Equal(t, int64(7), d.Remaining)
		require.NoError(t, lim.Reset(ctx, hkey))
		d, err = lim.PeekN(ctx, hkey, 10)
		require.NoError(t, err)
		assert.True(t, d.Allowed && !d.Degraded)
		for addr, st := range tier.BreakerStates() {
			if addr != victim {
				assert.Equal(t, "closed", st, "%s", addr)
			}
		}
	})
}

// TestUsageCountsLeaseHere: in write-back mode a usage read (PeekN of
// cost 0, core.Limiter.Usage) counts the units this server holds leased
// as remaining: after 30 admissions of 100 per minute it reads 30 used,
// 70 remaining, and 70 more are admitted; a peek of cost 1 stays
// conservative (the lease is not remaining to it).
func TestUsageCountsLeaseHere(t *testing.T) {
	remote := sharedMem{mustMem()}
	defer remote.Close()
	clk := core.NewManualClock(t0)
	l := core.MustNewLimiter(newTier(t, remote, WithSync(time.Minute), withoutSyncLoop(), WithClock(clk)),
		core.Policy{Name: "v", Limits: []core.Limit{core.PerMinute(100)}}, core.WithClock(clk))
	ctx := context.Background()
	for range 30 {
		d, err := l.Allow(ctx, "u")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	u, err := l.Usage(ctx, "u")
	require.NoError(t, err)
	assert.Equal(t, []int64{30, 70}, []int64{u.Used, u.Remaining})
	d, err := l.PeekN(ctx, "u", 1)
	require.NoError(t, err)
	assert.Less(t, d.Remaining, int64(69), "a peek of cost 1 does not count the lease")
	n := 0
	for ; n < 200; n++ {
		if d, _ := l.Allow(ctx, "u"); !d.Allowed {
			break
		}
	}
	assert.Equal(t, 70, n)
}
