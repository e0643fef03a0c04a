package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOOMIsNotAnOutage: a Redis out of memory (maxmemory + noeviction)
// answers every admission with an OOM error reply and still denies
// exhausted clients (a denial writes nothing). The breaker never opens on
// those replies, so under FailOpen no exhausted client is admitted.
func TestOOMIsNotAnOutage(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	tier := newTier(t, redisStore(t, c), WithDefaultFailMode(core.FailOpen), WithDenyCacheTTL(0),
		WithBreaker(3, 200*time.Millisecond, 50*time.Millisecond))
	pol := core.Policy{Name: "oom", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(10, time.Hour)}}
	// a deadline a loaded machine does not miss: a timeout would be
	// an outage, which FailOpen admits; the subject is the OOM reply
	lim := core.MustNewLimiter(tier, pol, core.WithTimeout(redistest.StoreTimeout))
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		for j := 0; j < 11; j++ {
			_, err := lim.Allow(ctx, fmt.Sprint("spent-", i))
			require.NoError(t, err)
		}
	}
	_, err := srv.Do("CONFIG", "SET", "maxmemory-policy", "noeviction")
	require.NoError(t, err)
	_, err = srv.Do("CONFIG", "SET", "maxmemory", "1")
	require.NoError(t, err)
	defer func() { _, _ = srv.Do("CONFIG", "SET", "maxmemory", "0") }()
	var spentAdmitted, oomReplies atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	var seq atomic.Int64
	hammer(&wg, 8, stop, func(int) {
		i := seq.Add(1)
		d, _ := lim.Allow(ctx, fmt.Sprint("spent-", i%10))
		if d.Allowed {
			spentAdmitted.Add(1)
		}
		if _, err := lim.Allow(ctx, fmt.Sprint("fresh-", i)); err != nil {
			oomReplies.Add(1)
		}
	})
	wg.Wait()
	t.Logf("OOM: %d failed admissions of fresh keys, %d breaker openings, %d exhausted clients admitted", oomReplies.Load(), tier.breakerOpenings(), spentAdmitted.Load())
	require.NotZero(t, oomReplies.Load(), "Redis was out of memory")
	assert.Zero(t, tier.breakerOpenings(), "an error reply is not an outage")
	assert.Zero(t, spentAdmitted.Load(), "exhausted clients stay denied")
}

// TestClientPauseWrite: under CLIENT PAUSE WRITE, PING answers while
// scripts hang. The breaker opens once and stays open (its probes are
// decisions, which hang too) until the pause ends; only the probes pay the
// deadline meanwhile; then it closes.
func TestClientPauseWrite(t *testing.T) {
	const tiers, perTier = 2, 8
	const coolDown, probe = 200 * time.Millisecond, 50 * time.Millisecond
	srv := redistest.StartNode(t)
	var stores []*fleetStore
	var lims []*core.Limiter
	pol := core.Policy{Name: "pausewrite", FleetSize: tiers, Limits: []core.Limit{core.Per(1<<30, time.Hour)}}
	for i := 0; i < tiers; i++ {
		s := newTier(t, redisStore(t, srv.NewClient(t)), WithBreaker(3, coolDown, probe))
		stores = append(stores, s)
		lims = append(lims, core.MustNewLimiter(s, pol))
	}
	ctx := context.Background()
	var timeouts atomic.Int64
	var wg sync.WaitGroup
	paused := time.Now()
	_, err := srv.Do("CLIENT", "PAUSE", "1500", "WRITE")
	require.NoError(t, err)
	stop := paused.Add(1400 * time.Millisecond)
	hammer(&wg, tiers*perTier, stop, func(g int) {
		if _, err := lims[g%tiers].Allow(ctx, "k"); core.ClassifyError(err) == "timeout" {
			timeouts.Add(1)
		}
	})
	wg.Wait()
	var openings int64
	// Read before the pause ends (a loaded machine may return from the
	// hammer after it; then the probes rightly close the breakers): a
	// breaker that opened is still open, since a probe is a decision and
	// hangs as the scripts do. (A starved process forgives its timeouts
	// for starveGrace, so a breaker may not have opened at all.)
	checked := time.Since(paused) < 1450*time.Millisecond
	for _, s := range stores {
		openings += s.breakerOpenings()
		if checked && s.breakerOpenings() > 0 {
			assert.NotEqual(t, "closed", s.BreakerState(), "the probes hang as the scripts do: open, or half-open with a probe out")
		}
	}
	t.Logf("CLIENT PAUSE WRITE 1.5 s: %d breaker openings, %d requests paid the deadline; states read while paused: %v", openings, timeouts.Load(), checked)
	assert.LessOrEqual(t, openings, int64(tiers), "one opening per tier: PING does not close it")
	assert.LessOrEqual(t, timeouts.Load(), int64(tiers*perTier*(3+2*int(starveGrace/core.DefaultTimeout))), "after the opening, no request waits on the paused Redis")
	require.Eventually(t, func() bool {
		for _, s := range stores {
			if s.BreakerState() != "closed" {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "the breakers close once decisions succeed")
}

// slowRemote is a remote store whose every call times out after the
// process was (as the test says) unable to run for lag: it records that
// lag with the tier's probe during the call, as the probe's loop would
// have, then fails as a deadline missed.
type slowRemote struct {
	probe *schedlag.Probe
	lag   time.Duration // recorded during each call (0: none)
	stale bool          // record it before the call instead
}

func (r *slowRemote) Take(ctx context.Context, _ string, _ *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	if r.lag > 0 && !r.stale {
		r.probe.Record(r.probe.Now(), r.lag)
	}
	return core.Decision{}, fmt.Errorf("slow remote: %w", context.DeadlineExceeded)
}

// TestStarvationForgivesOnlyTheTimeoutsItExplains: on an injected
// scheduler-latency probe (no loop: nothing the machine's load does
// counts), timeouts under a 50 ms deadline are forgiven (the breaker
// stays closed after 10 of them) only when, during each call, the process
// waited to run at least half the deadline: 60 ms (the tier moved the
// later calls' deadlines by the wait it saw, to 110 ms: half is 55); a
// process that waited 15 ms — busy, but its goroutines ran — has seen
// the store not answer,
// and so has one whose long wait came before the call started: the
// threshold of 3 timeouts opens the breaker, as a stopped Redis beside a
// busy loop must.
func TestStarvationForgivesOnlyTheTimeoutsItExplains(t *testing.T) {
	t.Run("Take", func(t *testing.T) { starvationForgives(t, false) })
	// a remote with TakeBy is handed the deadline, with no context
	// bounded by it: the verdict must still weigh the wait against it
	t.Run("TakeBy", func(t *testing.T) { starvationForgives(t, true) })
}

// slowByRemote is slowRemote with TakeBy, which the tier calls with the
// store deadline instead of a context bounded by it.
type slowByRemote struct {
	*slowRemote
	by atomic.Int64 // TakeBy calls whose context had no deadline
}

func (r *slowByRemote) TakeBy(ctx context.Context, _ time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if _, ok := ctx.Deadline(); !ok {
		r.by.Add(1)
	}
	return r.Take(ctx, key, p, now, cost)
}

func starvationForgives(t *testing.T, withTakeBy bool) {
	for _, c := range []struct {
		name  string
		lag   time.Duration
		stale bool
		open  bool
	}{
		{"no wait to run", 0, false, true},
		{"busy: waited 15 ms of 50", 15 * time.Millisecond, false, true},
		{"starved: waited 60 ms of 50", 60 * time.Millisecond, false, false},
		{"starved before the call", 60 * time.Millisecond, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			probe := schedlag.New()
			slow := &slowRemote{probe: probe, lag: c.lag, stale: c.stale}
			var remote core.Store = slow
			by := &slowByRemote{slowRemote: slow}
			if withTakeBy {
				remote = by
			}
			if c.stale {
				probe.Record(probe.Now(), c.lag)
				time.Sleep(time.Millisecond) // the calls start after it (probe's clock in µs)
			}
			opts := []Option{withLagProbe(probe), WithBreaker(3, time.Hour, time.Hour)}
			mode := core.FailLocal
			if withTakeBy {
				// no fallback admissions to forward: every take is a lone TakeBy
				mode = core.FailOpen
				opts = append(opts, WithDefaultFailMode(core.FailOpen))
			}
			tier := newTier(t, remote, opts...)
			lim := core.MustNewLimiter(tier, core.Policy{Name: "starve", FailMode: mode, Limits: []core.Limit{core.Per(1000, time.Hour)}},
				core.WithTimeout(50*time.Millisecond))
			for i := 0; i < 10; i++ {
				_, err := lim.Allow(context.Background(), "k")
				if i < 3 { // then the breaker may be open
					require.Equal(t, "timeout", core.ClassifyError(err), "%v", err)
				}
			}
			if withTakeBy {
				assert.GreaterOrEqual(t, by.by.Load(), int64(3), "TakeBy calls without a deadline context")
			}
			if c.open {
				assert.Equal(t, "open", tier.BreakerState(), "the store did not answer: an outage")
			} else {
				assert.Equal(t, "closed", tier.BreakerState(), "the process's own starvation explains the timeouts")
				assert.Zero(t, tier.breakerOpenings())
			}
		})
	}
}

// deadlineRemote answers every take at once, and records the deadline of
// the last one's context.
type deadlineRemote struct{ last atomic.Int64 }

func (r *deadlineRemote) Take(ctx context.Context, _ string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	if dl, ok := ctx.Deadline(); ok {
		r.last.Store(dl.UnixNano())
	}
	return core.Decision{Allowed: true, Remaining: 1, Policy: p.Name}, nil
}

// TestStarvedTierMovesTheDeadline: the tier is a store with TakeBy whose
// TakeBy moves the store deadline later by the process's recent wait to
// run (an injected probe: the machine's load adds nothing), by at most
// three times its own length: the remote store's call runs under the
// deadline exactly 30 ms later for a 30 ms wait, three deadlines later
// for a 10 s one, unmoved for none; a Limiter gives the tier its
// deadline that way.
func TestStarvedTierMovesTheDeadline(t *testing.T) {
	const budget = time.Second
	pol := &core.Policy{Name: "moved", Limits: []core.Limit{core.Per(1000, time.Hour)}}
	for _, c := range []struct{ lag, moved time.Duration }{{0, 0}, {30 * time.Millisecond, 30 * time.Millisecond}, {10 * time.Second, 3 * budget}} {
		probe := schedlag.New()
		if c.lag > 0 {
			probe.Record(probe.Now(), c.lag)
		}
		remote := &deadlineRemote{}
		tier := newTier(t, remote, withLagProbe(probe), WithDenyCacheTTL(0))
		dl := time.Now().Add(budget)
		_, err := tier.TakeBy(context.Background(), dl, "k", pol, time.Now(), 1)
		require.NoError(t, err)
		moved := time.Duration(remote.last.Load() - dl.UnixNano())
		if c.lag < budget {
			assert.Equal(t, c.moved, moved, "a wait of %v", c.lag)
		} else {
			assert.LessOrEqual(t, moved, c.moved, "at most three deadlines")
			assert.Greater(t, moved, 2*budget, "about three deadlines")
		}
		if c.lag == 10*time.Second {
			lim := core.MustNewLimiter(tier, *pol, core.WithTimeout(budget))
			before := time.Now()
			_, err := lim.Allow(context.Background(), "k2")
			require.NoError(t, err)
			assert.Greater(t, time.Unix(0, remote.last.Load()).Sub(before), 2*budget, "the Limiter's deadline, moved")
		}
	}
}
