package benchmarks

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	throttledredis "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	uluredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

// redisPeer builds a limiter on a Redis client, allowing n per hour.
type redisPeer struct {
	name string
	new  func(c redis.UniversalClient, n int64) allowFunc
}

var redisPeers = []redisPeer{
	{"limitkit", func(c redis.UniversalClient, n int64) allowFunc {
		st := must(redisstore.New(c))
		l := must(core.NewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(n, quotaWin)}}, core.WithTimeout(5*time.Second)))
		return func(k string) bool { d, err := l.Allow(ctx, k); return err == nil && d.Allowed }
	}},
	{"limitkit-sliding", func(c redis.UniversalClient, n int64) allowFunc {
		st := must(redisstore.New(c))
		l := must(core.NewLimiter(st, core.Policy{Name: "bench", Algorithm: core.SlidingWindowCounter, Limits: []core.Limit{core.Per(n, quotaWin)}}, core.WithTimeout(5*time.Second)))
		return func(k string) bool { d, err := l.Allow(ctx, k); return err == nil && d.Allowed }
	}},
	{"redis_rate", func(c redis.UniversalClient, n int64) allowFunc {
		l := redis_rate.NewLimiter(c)
		lim := redis_rate.Limit{Rate: int(n), Burst: int(n), Period: quotaWin}
		return func(k string) bool { r, err := l.Allow(ctx, k, lim); return err == nil && r.Allowed > 0 }
	}},
	{"ulule", func(c redis.UniversalClient, n int64) allowFunc {
		st := must(uluredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: "ulule", MaxRetry: 3}))
		l := ulule.New(st, ulule.Rate{Period: quotaWin, Limit: n})
		return func(k string) bool { r, err := l.Get(ctx, k); return err == nil && !r.Reached }
	}},
	{"throttled", func(c redis.UniversalClient, n int64) allowFunc {
		st := must(throttledredis.NewCtx(c, "throttled:"))
		l := must(throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerHour(int(n)), MaxBurst: int(n) - 1}))
		// an error is throttled giving up after its compare-and-swap
		// attempts under contention (parallel rows): its behaviour, not a
		// quota denial; only limited counts as one
		return func(k string) bool { limited, _, _ := l.RateLimitCtx(ctx, k, 1); return !limited }
	}},
}

// startRedis starts a private redis-server (never 6379) for one benchmark
// function and returns a client with a pool for 64 goroutines.
func startRedis(b *testing.B) *redis.Client {
	srv := redistest.StartNode(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkRedis: one decision's round trip on a hot key (serial: the
// latency a request pays), and throughput with 64 goroutines sharing one
// client (parallel: ns/op is wall time per decision across all of them).
func BenchmarkRedis(b *testing.B) {
	c := startRedis(b)
	for _, p := range redisPeers {
		b.Run("serial/lib="+p.name, func(b *testing.B) {
			c.FlushAll(ctx)
			allow := p.new(c, quota)
			checkAdmits(b, allow)
			var denied int64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if !allow("user:42") {
					denied++
				}
			}
			mustAdmit(b, denied)
		})
	}
	for _, p := range redisPeers {
		b.Run("parallel64/lib="+p.name, func(b *testing.B) {
			c.FlushAll(ctx)
			allow := p.new(c, quota)
			checkAdmits(b, allow)
			b.ReportAllocs()
			b.SetParallelism(64 / max(1, testingProcs()))
			var denied parallelDenials
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var n int64
				for pb.Next() {
					if !allow("user:42") {
						n++
					}
				}
				denied.add(n)
			})
			denied.check(b)
		})
	}
}

// redisFill is the number of distinct keys per bytes-per-key measurement.
const redisFill = 10_000

// memQuota is the per-hour limit of the memory benchmark: small enough
// that one request leaves state for minutes (under the never-binding
// quota a GCRA key is back to full microseconds later and expires at
// once, which would measure nothing), large enough to admit it.
const memQuota = 10

// BenchmarkRedisMemory fills a flushed Redis with 10k distinct keys, one
// request each under memQuota per hour, and reports the growth of
// used_memory per limited key (B/key) and how many Redis keys each limited
// key costs (rkeys/key).
func BenchmarkRedisMemory(b *testing.B) {
	c := startRedis(b)
	for _, p := range redisPeers {
		b.Run("10k/lib="+p.name, func(b *testing.B) {
			var perKey, rkeys float64
			var denied int64
			for b.Loop() {
				b.StopTimer()
				c.FlushAll(ctx)
				allow := p.new(c, memQuota)
				before := usedMemory(b, c)
				b.StartTimer()
				for i := range redisFill {
					if !allow("ip:10." + strconv.Itoa(i)) {
						denied++
					}
				}
				b.StopTimer()
				perKey = float64(usedMemory(b, c)-before) / redisFill
				rkeys = float64(c.DBSize(ctx).Val()) / redisFill
				b.StartTimer()
			}
			mustAdmit(b, denied)
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(rkeys, "rkeys/key")
		})
	}
}

func usedMemory(b *testing.B, c *redis.Client) int64 {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO")
	return 0
}

// testingProcs is GOMAXPROCS, the factor RunParallel multiplies
// SetParallelism by.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
