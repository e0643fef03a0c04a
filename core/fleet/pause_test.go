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
// Limiters (FailLocal, deadline 50ms) while Redis is SIGSTOPped. Requests
// in flight when Redis froze, and those sent before the breakers opened,
// pay the deadline — a bounded number, reported; once every breaker is
// open no request waits for Redis (p99 reported, and asserted below 1ms
// outside the race detector). Redis is resumed after the cool-down: every
// breaker then closes within about one probe interval of SIGCONT (a PING
// is always in flight or due within one), and once the tiers are closed
// no goroutine is left behind.
func TestRedisPausedMidTraffic(t *testing.T) {
	const tiers, perTier = 4, 16
	const coolDown, probe = 200 * time.Millisecond, 50 * time.Millisecond
	srv := redistest.StartNode(t)
	base := runtime.NumGoroutine()
	var clients []*redis.Client
	var stores []*Store
	var lims []*core.Limiter
	ev := &events{}
	pol := core.Policy{Name: "paused", FailMode: core.FailLocal, FleetSize: tiers, Limits: []core.Limit{core.Per(1<<30, time.Hour)}}
	for i := 0; i < tiers; i++ {
		c := redis.NewClient(srv.ClientOptions())
		c.AddHook(sentHook{})
		clients = append(clients, c)
		rs, err := redisstore.New(c)
		require.NoError(t, err)
		s, err := New(rs, WithBreaker(3, coolDown, probe), WithObserver(ev))
		require.NoError(t, err)
		stores = append(stores, s)
		lims = append(lims, core.MustNewLimiter(s, pol))
	}
	var phase atomic.Int32 // 0 before the pause, 1 paused, 2 all breakers open, 3 stop
	var mu sync.Mutex
	var paid int                // requests that waited for the deadline
	var paidLate int            // of which started after every breaker was open
	var openLat []time.Duration // latencies once every breaker was open
	var wg sync.WaitGroup
	ctx := context.Background()
	for g := 0; g < tiers*perTier; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			lim := lims[g%tiers]
			for phase.Load() < 3 {
				ph := phase.Load()
				rec := &sentRec{}
				start := time.Now()
				d, err := lim.Allow(context.WithValue(ctx, sentKey{}, rec), "k")
				el := time.Since(start)
				mu.Lock()
				// a request that sent a command and timed out waited on
				// Redis; one that timed out without sending was only
				// descheduled past its deadline (a loaded machine)
				if rec.sent.Load() && core.ClassifyError(err) == core.ErrorTimeout {
					paid++ // waited on Redis until the deadline
				}
				if ph == 2 && rec.sent.Load() {
					paidLate++ // started with every breaker open, yet sent
				}
				if ph == 2 && phase.Load() == 2 {
					openLat = append(openLat, el)
				}
				mu.Unlock()
				if !d.Allowed {
					t.Error("FailLocal at a huge limit denied")
					return
				}
			}
		}(g)
	}
	time.Sleep(100 * time.Millisecond) // traffic flowing
	srv.Pause()
	phase.Store(1)
	require.Eventually(t, func() bool {
		for _, s := range stores {
			if s.BreakerState() == core.BreakerClosed {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond)
	phase.Store(2)
	// decisions with every breaker open, through the cool-down and a few
	// failing probes
	time.Sleep(coolDown + 3*probe)
	phase.Store(1)
	resumed := time.Now()
	srv.Resume()
	require.Eventually(t, func() bool {
		for _, s := range stores {
			if s.BreakerState() != core.BreakerClosed {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond)
	closedAfter := time.Since(resumed)
	phase.Store(3)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, openLat)
	slices.Sort(openLat)
	p99 := openLat[len(openLat)*99/100]
	t.Logf("paid the deadline: %d requests (%d goroutines); with breakers open: %d decisions, p50 %v, p99 %v, max %v; closed %v after SIGCONT (cool-down %v, probe %v)",
		paid, tiers*perTier, len(openLat), openLat[len(openLat)/2], p99, openLat[len(openLat)-1], closedAfter, coolDown, probe)
	// Only requests sent before their tier's breaker opened may pay: the
	// ones in flight when Redis stopped, and those a goroutine sent while
	// its tier had seen fewer than the threshold (3) of the first wave's
	// failures; under load a goroutine can send up to the threshold of
	// them — and, when the process is starved (64 busy goroutines on a
	// small machine), for up to starveGrace before timeouts count.
	// Once open, only the half-open probes (one request per tier per probe
	// interval past the cool-down) reach Redis: paidLate is that check.
	assert.LessOrEqual(t, paid, tiers*perTier*(3+2*int(starveGrace/core.DefaultTimeout)), "a goroutine pays the deadline at most threshold times, plus the starvation grace")
	assert.LessOrEqual(t, paidLate, tiers*(1+int(3*probe/probe)), "with the breakers open, only the probes reach Redis")
	if !raceEnabled {
		assert.Less(t, p99, time.Millisecond)
	}
	// Typically one probe interval (the next request after it is the
	// probe); the bound leaves room for a CPU-starved test machine, where
	// a probe can itself time out, and the figure is reported rather than
	// asserted tightly.
	assert.Less(t, closedAfter, coolDown+30*probe, "past the cool-down, the breaker closes about one probe interval after SIGCONT")
	assert.NotEmpty(t, ev.kinds(core.EventFallback))

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

// sentKey is the context key of a request's sentRec.
type sentKey struct{}

// sentRec records whether a request sent a command to Redis (a breaker's
// PING is not one: it runs on its own context).
type sentRec struct{ sent atomic.Bool }

// sentHook marks the sentRec of the request a command belongs to.
type sentHook struct{}

func (sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if rec, ok := ctx.Value(sentKey{}).(*sentRec); ok {
			rec.sent.Store(true)
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
