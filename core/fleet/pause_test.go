package fleet

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedisPausedMidTraffic: 4 tiers × 16 goroutines decide through
// Limiters (FailLocal, deadline 400ms) while Redis is SIGSTOPped. The
// deadline is long so that waiting for Redis stands out from what a
// loaded machine does to every request: beside three busy loops at load
// 20, requests with no Redis behind them stalled 70–230 ms at times,
// many at once (a lock's holder descheduled), enough to make a p99 at a
// 50 ms deadline.
//
// What it asserts, and holds on a loaded machine (the breakers may also
// trip before the pause, when the deadline passes on a healthy but
// CPU-starved Redis):
//   - No request sends a command to Redis while its tier's breaker is
//     open: a request counts as "after the breaker opened" only if it
//     started after the open was observed (the tier's state read before
//     it started was not closed) and the breaker did not close before it
//     returned (the tier's count of closes is the same after it).
//   - Of the requests started while Redis was paused, only those sent before
//     their tier's breaker opened pay the deadline: at most the threshold
//     (3) per goroutine, plus what a starved process's forgiven timeouts
//     let through (starveGrace).
//   - Once open, only the half-open probes reach Redis: a background
//     decision first, then at most one request per tier per probe
//     interval, so the requests that send while the breaker stays open are
//     bounded by the probe intervals from the pause to the last close
//     (measured: on a loaded machine the breakers close seconds after
//     SIGCONT, and the probes go on meanwhile).
//   - Once Redis is resumed after the cool-down every breaker closes (a
//     probe, a real decision, succeeds), within 10s. On an idle machine
//     that is within one probe interval of SIGCONT, but a probe on a
//     CPU-starved machine can itself miss its deadline, so the time and
//     the probe commands it took are reported, not asserted.
//   - Requests decided while the breaker was open, other than the probes
//     (the requests that sent a command, bounded above), do not wait for
//     Redis: their p99 is within half the store deadline (200ms) of the
//     p99 of a baseline measured by the same goroutine right after each
//     of them: a decision through a fifth tier whose breaker is open over
//     a store that is never called (the same code path — breaker, local
//     fallback, observer — with no Redis behind it, and the default
//     50ms deadline, so that a wait added to that path shows in the
//     baseline at 50ms and in the requests at 400ms). A loaded machine
//     delays both alike; a request that waited for Redis, or behind one
//     that does, would wait up to the deadline (400ms). Both p99s are
//     reported (typically well under 1ms).
//   - Once the tiers are closed no goroutine is left behind.
func TestRedisPausedMidTraffic(t *testing.T) {
	const tiers, perTier = 4, 16
	const coolDown, probe = 200 * time.Millisecond, 50 * time.Millisecond
	const pace = 2 * time.Millisecond // between a goroutine's requests: 32,000 decisions/s in all
	const timeout = 400 * time.Millisecond
	srv := redistest.StartNode(t)
	base := runtime.NumGoroutine()
	var clients []*redis.Client
	var stores []*fleetStore
	var lims []*core.Limiter
	ev := &fallbackCount{}
	obs := make([]*closeCounter, tiers)
	pol := core.Policy{Name: "paused", FailMode: core.FailLocal, FleetSize: tiers, Limits: []core.Limit{core.Per(1<<30, time.Hour)}}
	for i := 0; i < tiers; i++ {
		c := redis.NewClient(srv.ClientOptions())
		obs[i] = &closeCounter{Observer: ev}
		c.AddHook(sentHook{probes: &obs[i].probes})
		clients = append(clients, c)
		rs, err := redisstore.New(c)
		require.NoError(t, err)
		s, err := newFleet(rs, WithBreaker(3, coolDown, probe), WithObserver(obs[i]))
		require.NoError(t, err)
		stores = append(stores, s)
		lims = append(lims, core.MustNewLimiter(s, pol, core.WithTimeout(timeout)))
	}
	var phase atomic.Int32 // 0 before the pause, 1 paused, 2 resumed, 3 stop
	var mu sync.Mutex
	var paid int                // requests started after the pause that waited for the deadline
	var paidLate int            // requests started and ended with their breaker open that sent a command
	var openLat []time.Duration // latencies of those requests that sent no command
	var baseLat []time.Duration // the baseline tier's, right after each of them
	baseStore, baseLim := openTierBaseline(t, pol)
	var wg sync.WaitGroup
	ctx := context.Background()
	for g := 0; g < tiers*perTier; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			lim, s, o := lims[g%tiers], stores[g%tiers], obs[g%tiers]
			for phase.Load() < 3 {
				ph := phase.Load()
				closes := o.closes.Load()
				open := s.BreakerState() != "closed"
				rec := &sentRec{}
				start := time.Now()
				d, err := lim.Allow(context.WithValue(ctx, sentKey{}, rec), "k")
				el := time.Since(start)
				late := open && o.closes.Load() == closes
				var bel time.Duration
				if late && !rec.sent.Load() {
					bstart := time.Now()
					_, _ = baseLim.Allow(ctx, "k")
					bel = time.Since(bstart)
				}
				mu.Lock()
				// a request that sent a command and timed out waited on
				// Redis; one that timed out without sending was only
				// descheduled past its deadline (a loaded machine)
				if ph == 1 && rec.sent.Load() && core.ClassifyError(err) == "timeout" {
					paid++ // waited on Redis until the deadline
				}
				if late {
					if rec.sent.Load() {
						paidLate++ // the breaker was open throughout, yet it sent: a probe
					} else {
						openLat = append(openLat, el)
						baseLat = append(baseLat, bel)
					}
				}
				mu.Unlock()
				if !d.Allowed {
					t.Error("FailLocal at a huge limit denied")
					return
				}
				// a server's goroutines wait for their clients; spinning
				// ones would starve the probes (and Redis) of CPU
				time.Sleep(pace)
			}
		}(g)
	}
	time.Sleep(100 * time.Millisecond) // traffic flowing
	srv.Pause()
	paused := time.Now()
	phase.Store(1)
	allClosed := func() bool {
		for _, s := range stores {
			if s.BreakerState() != "closed" {
				return false
			}
		}
		return true
	}
	require.Eventually(t, func() bool {
		for _, s := range stores {
			if s.BreakerState() == "closed" {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond)
	// decisions with every breaker open, through the cool-down and a few
	// failing probes
	time.Sleep(coolDown + 3*probe)
	probesBefore := make([]int64, tiers)
	for i, o := range obs {
		probesBefore[i] = o.probes.Load()
		o.armed.Store(true)
	}
	phase.Store(2)
	resumed := time.Now()
	srv.Resume()
	require.Eventually(t, allClosed, 10*time.Second, time.Millisecond)
	closedAfter := time.Since(resumed)
	openFor := time.Since(paused) // the longest a breaker was not closed
	phase.Store(3)
	wg.Wait()
	require.NoError(t, baseStore.Close())

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, openLat)
	slices.Sort(openLat)
	slices.Sort(baseLat)
	p99, baseP99 := openLat[len(openLat)*99/100], baseLat[len(baseLat)*99/100]
	probes := make([]int64, tiers)
	for i, o := range obs {
		probes[i] = o.probesAtClose.Load() - probesBefore[i]
	}
	t.Logf("paid the deadline after the pause: %d requests (%d goroutines); with the breaker open: %d probes, %d decisions, p50 %v, p99 %v (baseline %v), max %v (baseline %v); closed %v after SIGCONT, probe commands started after SIGCONT per tier %v (cool-down %v, probe %v)",
		paid, tiers*perTier, paidLate, len(openLat), openLat[len(openLat)/2], p99, baseP99, openLat[len(openLat)-1], baseLat[len(baseLat)-1], closedAfter, probes, coolDown, probe)
	// Only requests sent before their tier's breaker opened may pay: the
	// ones a goroutine sent while its tier had seen fewer than the
	// threshold (3) of the first wave's failures; under load a goroutine
	// can send up to the threshold of them — and, when the process is
	// starved (64 busy goroutines on a small machine), for up to
	// starveGrace before timeouts count. Once open, only the half-open
	// probes reach Redis: paidLate is that check.
	assert.LessOrEqual(t, paid, tiers*perTier*(3+2*int(starveGrace/timeout)), "a goroutine pays the deadline at most threshold times, plus the starvation grace")
	// a request probes at most once per probe interval per tier (the
	// half-open probe), over the time the breakers were not closed
	assert.LessOrEqual(t, paidLate, tiers*(2+int(openFor/probe)), "with the breakers open, only the probes reach Redis")
	// a loaded machine delays the baseline as much; a request waiting
	// for Redis would add up to the deadline
	assert.Less(t, p99, baseP99+timeout/2, "with the breaker open no request but the probes waits for Redis (p99 against the baseline's)")
	assert.NotZero(t, ev.n.Load(), "fallback events")

	for _, s := range stores {
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "Close is idempotent")
	}
	for _, c := range clients {
		require.NoError(t, c.Close())
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > base && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines leaked: %d, before %d:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// fallbackCount counts fallback events. It stores nothing else: a
// recorder appending every event under one mutex (events) delays the
// decisions whose latency the test measures, by the copies of its growing
// slice.
type fallbackCount struct{ n atomic.Int64 }

func (f *fallbackCount) Observe(e core.Event) {
	if e.Kind == core.EventFallback {
		f.n.Add(1)
	}
}

// sentKey is the context key of a request's sentRec.
type sentKey struct{}

// sentRec records whether a request sent a command to Redis (a breaker's
// background probe is not one: it runs on its own context).
type sentRec struct{ sent atomic.Bool }

// sentHook marks the sentRec of the request a command belongs to, and
// counts the commands no request sent (the breaker's background probes).
type sentHook struct{ probes *atomic.Int64 }

// closeCounter counts a tier's breaker closes, and notes how many probe
// commands its client had started at the first close once armed.
type closeCounter struct {
	core.Observer
	closes, probes, probesAtClose atomic.Int64
	armed                         atomic.Bool
}

func (c *closeCounter) Observe(e core.Event) {
	if e.Kind == core.EventBreaker && e.To == "closed" {
		if c.armed.CompareAndSwap(true, false) {
			c.probesAtClose.Store(c.probes.Load())
		}
		c.closes.Add(1)
	}
	c.Observer.Observe(e)
}

func (sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if rec, ok := ctx.Value(sentKey{}).(*sentRec); ok {
			rec.sent.Store(true)
		} else {
			h.probes.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if rec, ok := ctx.Value(sentKey{}).(*sentRec); ok {
			rec.sent.Store(true)
		}
		return next(ctx, cmds)
	}
}

// openTierBaseline returns a tier whose breaker is open for good over a
// store that always fails at once (it is never called again: an hour's
// cool-down and probe interval), and a Limiter of pol over it: each of
// its decisions takes the path of a decision with the breaker open
// (breaker, local fallback, observer) with no Redis behind it.
func openTierBaseline(t *testing.T, pol core.Policy) (*fleetStore, *core.Limiter) {
	remote := newFake()
	remote.setFail(errDown)
	s, err := newFleet(remote, WithBreaker(1, time.Hour, time.Hour), WithObserver(&fallbackCount{}))
	require.NoError(t, err)
	pol.Name = "baseline"
	lim := core.MustNewLimiter(s, pol)
	_, _ = lim.Allow(context.Background(), "k") // opens the breaker
	require.Equal(t, "open", s.BreakerState())
	return s, lim
}
