package redisstore

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// benchPolicies is one single-limit policy per algorithm and a two-limit
// policy, sized like real per-user limits.
func benchPolicies() []core.Policy {
	return []core.Policy{
		{Name: "gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "token_bucket", Algorithm: core.TokenBucket, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "sliding_log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "sliding_counter", Algorithm: core.SlidingWindowCounter, Buckets: 60, Limits: []core.Limit{core.PerHour(1000)}},
		{Name: "gcra_two_limits", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(900, 15*time.Minute), core.PerMinute(200)}},
		{Name: "sliding_log_two_limits", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(900, 15*time.Minute), core.PerMinute(200)}},
	}
}

// floorScript is the practical floor: one EVALSHA of a trivial script on
// one hash-tagged key.
var floorScript = redis.NewScript(`return {1, 0, 0, 0, 0}`)

// getSetScript is the least any stateful script does: read the key and
// write it back with a TTL (601 ms, the single-limit GCRA's after one
// request at 100/min). It is a reference for the part of a decision's
// cost that is Redis creating, expiring and freeing keys, which the floor
// does not pay.
var getSetScript = redis.NewScript(`redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], '1', 'PX', '601') return {1, 0, 0, 0, 0}`)

const benchGoroutines = 64

func benchKeys(n int) []string {
	k := make([]string, n)
	for i := range k {
		k[i] = "user-" + strconv.Itoa(i)
	}
	return k
}

// BenchmarkTake measures one decision per algorithm, serial (latency) and
// with 64 goroutines (throughput), next to a raw EVALSHA in the same run
// (and a raw GET+SET script, see getSetScript).
// Time comes from Redis (the default). Keys rotate over 100,000 users.
func BenchmarkTake(b *testing.B) {
	srv := redistest.StartNode(b)
	opt := srv.ClientOptions()
	opt.PoolSize = benchGoroutines
	c := redis.NewClient(opt)
	b.Cleanup(func() { c.Close() })
	s := newStore(b, c)
	ctx := context.Background()
	if err := s.Preload(ctx); err != nil {
		b.Fatal(err)
	}
	keys := benchKeys(100_000)
	tagged := make([]string, len(keys))
	// One *Policy for all: the store caches compiled policies by pointer,
	// and 100,000 throwaway pointers would fill that cache before the
	// measured policies arrive.
	floorPolicy := &core.Policy{Name: "floor", Limits: []core.Limit{core.PerSecond(1)}}
	for i, k := range keys {
		ks, err := s.Keys(floorPolicy, k)
		if err != nil {
			b.Fatal(err)
		}
		tagged[i] = ks[0]
	}
	for _, sc := range []*redis.Script{floorScript, getSetScript} {
		if err := sc.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	par := max(1, benchGoroutines/runtime.GOMAXPROCS(0))

	run := func(b *testing.B, parallel bool, f func(i int) error) {
		b.ReportAllocs()
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		if !parallel {
			for i := 0; b.Loop(); i++ {
				if err := f(i); err != nil {
					b.Fatal(err)
				}
			}
		} else {
			b.SetParallelism(par)
			var seq atomicCounter
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := f(seq.next()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		b.StopTimer()
		reportScriptStats(b, ctx, c)
	}
	for _, mode := range []string{"serial", "parallel64"} {
		parallel := mode == "parallel64"
		b.Run("raw_evalsha/"+mode, func(b *testing.B) {
			run(b, parallel, func(i int) error {
				return floorScript.Run(ctx, c, []string{tagged[i%len(tagged)]}, "", 1).Err()
			})
		})
		b.Run("raw_get_set/"+mode, func(b *testing.B) {
			run(b, parallel, func(i int) error {
				return getSetScript.Run(ctx, c, []string{tagged[i%len(tagged)]}, "", 1).Err()
			})
		})
		for _, pol := range benchPolicies() {
			p := pol
			if err := p.Validate(); err != nil {
				b.Fatal(err)
			}
			b.Run(p.Name+"/"+mode, func(b *testing.B) {
				run(b, parallel, func(i int) error {
					_, err := s.Take(ctx, keys[i%len(keys)], &p, time.Time{}, 1)
					return err
				})
			})
		}
	}
}

// reportScriptStats reports Redis's own view of the scripts run since the
// last CONFIG RESETSTAT, from INFO commandstats: the server CPU per script
// call (redis-µs/call, usec_per_call of EVALSHA and EVAL together, far
// less noisy than wall time on a shared machine) and the script calls per
// operation (scripts/op: 1 is one round trip per decision).
func reportScriptStats(b *testing.B, ctx context.Context, c *redis.Client) {
	b.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var calls, usec float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(line[strings.IndexByte(line, ':')+1:], ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += x
			case "usec":
				usec += x
			}
		}
	}
	if calls > 0 {
		b.ReportMetric(usec/calls, "redis-µs/call")
	}
	b.ReportMetric(calls/float64(b.N), "scripts/op")
}

type atomicCounter struct{ n atomicInt }

func (a *atomicCounter) next() int { return int(a.n.Add(1)) }

// BenchmarkMemoryUsage reports Redis's MEMORY USAGE per key (B/key) for
// single-limit GCRA, fixed window and token bucket (100/min, 3 requests
// made), the sliding counter with 60 buckets (1000/h, one request in each
// of 60 minutes) and the sliding log at 500 requests (500/h, full). It
// measures memory, not time.
func BenchmarkMemoryUsage(b *testing.B) {
	srv := redistest.StartNode(b)
	c := srv.NewClient(b)
	s := newStore(b, c, WithClientTime())
	ctx := context.Background()
	type fill struct {
		p     core.Policy
		calls int
		step  time.Duration
	}
	fills := []fill{
		{core.Policy{Name: "gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(100)}}, 3, time.Second},
		{core.Policy{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(100)}}, 3, time.Second},
		{core.Policy{Name: "token_bucket", Algorithm: core.TokenBucket, Limits: []core.Limit{core.PerMinute(100)}}, 3, time.Second},
		{core.Policy{Name: "sliding_counter_60", Algorithm: core.SlidingWindowCounter, Buckets: 60, Limits: []core.Limit{core.PerHour(1000)}}, 60, time.Minute},
		{core.Policy{Name: "sliding_log_500", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(500)}}, 500, time.Second},
	}
	for _, f := range fills {
		b.Run(f.p.Name, func(b *testing.B) {
			var bytes int64
			for b.Loop() {
				key := "user-" + strconv.Itoa(1_000_000+len(f.p.Name))
				now := epoch
				for i := 0; i < f.calls; i++ {
					if _, err := s.Take(ctx, key, &f.p, now, 1); err != nil {
						b.Fatal(err)
					}
					now = now.Add(f.step)
				}
				ks, _ := s.Keys(&f.p, key)
				n, err := c.MemoryUsage(ctx, ks[0]).Result()
				if err != nil {
					b.Fatal(err)
				}
				bytes = n
				c.Del(ctx, ks...)
			}
			b.ReportMetric(float64(bytes), "B/key")
		})
	}
}

// BenchmarkWorstCase runs each conformkit.WorstCases pattern on one key, serially,
// under client time: the latency and the Redis CPU (redis-µs/call) of one
// decision at the largest configurations validation accepts, next to a
// single-limit GCRA in the same run.
func BenchmarkWorstCase(b *testing.B) {
	srv := redistest.StartNode(b)
	c := srv.NewClient(b)
	s := newStore(b, c, WithClientTime())
	ctx := context.Background()
	for _, wc := range conformkit.WorstCases() {
		b.Run(wc.Name, func(b *testing.B) {
			p := wc.Policy
			t0 := epoch
			take := func(at time.Duration, cost int64) core.Decision {
				d, err := s.Take(ctx, "user:42", &p, t0.Add(at), cost)
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			if wc.Setup != nil {
				wc.Setup(take)
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for i := 0; b.Loop(); i++ {
				at, cost, allowed := wc.Step(i)
				if d := take(at, cost); d.Allowed != allowed {
					b.Fatalf("step %d: allowed %v", i, d.Allowed)
				}
				n++
			}
			b.StopTimer()
			reportScriptStats(b, ctx, c)
			ks, _ := s.Keys(&p, "user:42")
			c.Del(ctx, ks...)
		})
	}
}

// BenchmarkPipelinedHotKey is one hot key decided by 64 goroutines
// through a Limiter on a pipelined store (never-binding quota, Redis
// time): the client's side of benchmarks' BenchmarkPipelining/node/c=64,
// alone, for CPU profiles of the client's cost per decision.
//
//	go test -run '^$' -bench PipelinedHotKey -cpuprofile cpu.out ./core/redisstore/
func BenchmarkPipelinedHotKey(b *testing.B) {
	srv := redistest.StartNode(b)
	opt := srv.ClientOptions()
	opt.PoolSize = benchGoroutines
	c := redis.NewClient(opt)
	b.Cleanup(func() { c.Close() })
	s := newStore(b, c, WithPipelining(Pipelining{}))
	l, err := core.NewLimiter(s, core.Policy{Name: "hot", Limits: []core.Limit{core.Per(1_000_000_000, time.Hour)}}, core.WithTimeout(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Allow(ctx, "hot"); err != nil {
		b.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(max(1, benchGoroutines/runtime.GOMAXPROCS(0)))
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if d, err := l.Allow(ctx, "hot"); err != nil || !d.Allowed {
				b.Error(d, err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "client-cpu-µs/op")
	reportScriptStats(b, ctx, c)
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
