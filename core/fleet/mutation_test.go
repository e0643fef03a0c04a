package fleet

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests written for mutations that survived the suite (issue 41); each
// mutation is listed in .ci/mutations/stores.txt with the test that kills
// it.

// leaseOf is the number of units the tier holds leased for key under p.
func leaseOf(s *fleetStore, key string, p *core.Policy) int64 {
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[ekey{p: p, key: key}]; e != nil {
		return e.lease
	}
	return 0
}

// TestResetDropsTheLease: a write-back tier holding leased units of a key
// (charged at the remote store before the reset) and resetting the key
// does not spend them afterwards: from the reset on, the tier admits
// exactly the fresh quota, 400, every unit of it charged at the remote
// store after the reset.
func TestResetDropsTheLease(t *testing.T) {
	f := verbFake{fake: newFake()}
	clk := core.NewManualClock(t0)
	tier := newTier(t, f, WithClock(clk), WithSync(time.Minute), withoutSyncLoop())
	lim := core.MustNewLimiter(tier, core.Policy{Name: "reset-lease", Limits: []core.Limit{core.PerMinute(400)}}, core.WithClock(clk))
	ctx := context.Background()
	for range 20 {
		d, err := lim.Allow(ctx, "u")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	held := leaseOf(tier, "u", lim.Policy())
	require.Positive(t, held, "the tier holds a lease before the reset")

	require.NoError(t, lim.Reset(ctx, "u"))
	assert.Zero(t, leaseOf(tier, "u", lim.Policy()), "the reset dropped the lease")
	charged := f.charged.Load()
	admitted := int64(0)
	for {
		d, err := lim.Allow(ctx, "u")
		require.NoError(t, err)
		if !d.Allowed {
			break
		}
		admitted++
		require.LessOrEqual(t, admitted, int64(400+held), "runaway")
	}
	assert.Equal(t, int64(400), admitted, "after the reset the tier admits the fresh quota, not the old lease on top (held %d)", held)
	assert.Equal(t, admitted, f.charged.Load()-charged, "every unit admitted after the reset was charged after it")
}

// TestCreditRefundsTheLocalShare: a refund the remote store took (the
// Limiter's Refund through the tier) is given back to the key's local
// share too, as a charge was taken from it: 4 charged and refunded while
// the remote store answers, an outage right after admits the whole share
// of 10 / 2 = 5, not the 1 the charge left.
func TestCreditRefundsTheLocalShare(t *testing.T) {
	f := verbFake{fake: newFake()}
	clk := core.NewManualClock(t0)
	tier := newTier(t, f, WithClock(clk), withoutSyncLoop(), WithFlapHorizon(0))
	lim := core.MustNewLimiter(tier, core.Policy{Name: "credit", FailMode: core.FailLocal, FleetSize: 2, Limits: []core.Limit{core.PerMinute(10)}},
		core.WithClock(clk), core.WithLogger(nil))
	ctx := context.Background()
	d, err := lim.Charge(ctx, "u", 4)
	require.NoError(t, err)
	require.Equal(t, int64(6), d.Remaining)
	d, err = lim.Refund(ctx, "u", 4)
	require.NoError(t, err)
	require.Equal(t, int64(10), d.Remaining, "the remote store took the refund")

	f.setFail(errDown)
	admitted := 0
	for range 10 {
		d, err := lim.Allow(ctx, "u")
		require.Error(t, err)
		require.True(t, d.Degraded)
		if d.Allowed {
			admitted++
		}
	}
	assert.Equal(t, 5, admitted, "the local share got the refund back")
}

// TestBreakerSweepKeepsOpenBreakers: the sweep (run by the sync loop once
// per domainIdle) reclaims a closed breaker left unused since the
// previous sweep (a master gone after a failover), keeps one used
// meanwhile, and never reclaims an open breaker, used or not: its
// domain's keys keep failing fast instead of reaching the dead master
// through a fresh closed breaker.
func TestBreakerSweepKeepsOpenBreakers(t *testing.T) {
	clk := core.NewManualClock(t0)
	cfg := &config{threshold: 1, coolDown: time.Hour, probe: time.Hour, clock: clk, openings: new(atomic.Int64)}
	var d domains
	d.init(cfg)
	dead, gone, live := d.get("dead:1"), d.get("gone:1"), d.get("live:1")
	dead.failure()
	require.Equal(t, breakerOpen, dead.state())

	d.sweep(t0) // every breaker was used since New: none reclaimed
	require.Len(t, d.m, 3)
	d.get("live:1")
	d.sweep(t0.Add(domainIdle - time.Second))
	require.Len(t, d.m, 3, "at most one sweep per domainIdle")

	d.sweep(t0.Add(domainIdle))
	assert.Equal(t, map[string]breakerState{"": breakerClosed, "dead:1": breakerOpen, "live:1": breakerClosed}, d.states(),
		"the unused closed breaker was reclaimed, the open one kept")
	assert.Same(t, dead, d.get("dead:1"), "the dead domain keeps its open breaker")
	assert.False(t, d.get("dead:1").allow(), "its keys still fail fast")
	assert.Same(t, live, d.get("live:1"))
	assert.NotSame(t, gone, d.get("gone:1"), "a reclaimed domain gets a fresh breaker")

	d.sweep(t0.Add(3 * domainIdle))
	assert.Equal(t, breakerOpen, d.states()["dead:1"], "an open breaker unused for several sweeps is still kept")
}

// TestDomainCapIsExact: a tier keeps its own breaker for exactly
// maxDomains failure domains; every further domain shares the default
// breaker.
func TestDomainCapIsExact(t *testing.T) {
	cfg := &config{threshold: 1, coolDown: time.Hour, probe: time.Hour, clock: core.NewManualClock(t0), openings: new(atomic.Int64)}
	var d domains
	d.init(cfg)
	own := map[*breaker]bool{}
	for i := range maxDomains {
		b := d.get(fmt.Sprint("master-", i))
		require.NotSame(t, &d.def, b, "domain %d of %d has its own breaker", i+1, maxDomains)
		own[b] = true
	}
	assert.Len(t, own, maxDomains)
	assert.Same(t, &d.def, d.get("one-more"), "domain %d shares the default breaker", maxDomains+1)
	assert.Len(t, d.m, maxDomains)
	assert.Same(t, d.get("master-0"), d.get("master-0"), "a known domain keeps its breaker past the cap")
}

// TestFailLocalOnTimeoutBeforeBreakerOpens: a FailLocal decision whose
// remote call hits the Limiter's store deadline (a hung remote store, the
// breaker still closed) is decided by the key's local share, Degraded:
// the deadline is not the caller's cancellation, which alone gets no
// fallback. With a limit of 10 on a fleet of 2, 5 of 8 are admitted, not
// all 8 by failing open.
func TestFailLocalOnTimeoutBeforeBreakerOpens(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	tier := newTier(t, f, WithClock(clk), WithBreaker(1<<30, time.Hour, time.Hour), withoutSyncLoop(), WithFlapHorizon(0))
	lim := core.MustNewLimiter(tier, core.Policy{Name: "timeout-local", FailMode: core.FailLocal, FleetSize: 2, Limits: []core.Limit{core.PerMinute(10)}},
		core.WithClock(clk), core.WithTimeout(5*time.Millisecond), core.WithLogger(nil))
	f.hang.Store(true)
	defer f.hang.Store(false) // Close forwards the owed admissions
	ctx := context.Background()
	admitted := 0
	for range 8 {
		d, err := lim.Allow(ctx, "u")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, d.Degraded, "decided by the fallback")
		var se *core.StoreError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, core.FailLocal, se.Mode, "the local share decided, not the fail-open default")
		if d.Allowed {
			admitted++
		}
	}
	assert.Equal(t, "closed", tier.BreakerState())
	assert.Equal(t, 5, admitted, "the local share of 10 / 2")
}
