package benchmarks

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	uluredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/redisstore"
)

// Redis's own CPU per decision, the figure that decides how many decisions
// one Redis serves: INFO commandstats times every script call inside the
// server (usec_per_call), so it leaves out the network, the client and the
// scheduler, which dominate the wall time on a shared machine. Every
// library here makes one script call per decision (scripts/op says so).

// cpuUsers is the number of distinct keys the decisions rotate over. Every
// key is decided once before the measurement, so the steady state is
// measured: the key exists, as it does for an active client.
const cpuUsers = 2_000

// cpuCase is one (algorithm, library) row.
type cpuCase struct {
	alg, lib string
	new      func(c redis.UniversalClient) allowFunc
}

// kitRedis is a limitkit Limiter on the Redis store (Redis TIME, as
// redis_rate; the default).
func kitRedis(p core.Policy) func(c redis.UniversalClient) allowFunc {
	return func(c redis.UniversalClient) allowFunc {
		st := must(redisstore.New(c))
		// A deadline long enough for a loaded machine: a timed-out call
		// would measure the fail-open path (the peers have no deadline).
		l := must(core.NewLimiter(st, p, core.WithTimeout(5*time.Second)))
		return func(k string) bool { d, err := l.Allow(ctx, k); return err == nil && d.Allowed }
	}
}

func rateLimit(d time.Duration) core.Limit { return core.Per(quota, d) }

func redisRate(period time.Duration) func(c redis.UniversalClient) allowFunc {
	return func(c redis.UniversalClient) allowFunc {
		l := redis_rate.NewLimiter(c)
		lim := redis_rate.Limit{Rate: quota, Burst: quota, Period: period}
		return func(k string) bool { r, err := l.Allow(ctx, k, lim); return err == nil && r.Allowed > 0 }
	}
}

func ululeRedis(period time.Duration) func(c redis.UniversalClient) allowFunc {
	return func(c redis.UniversalClient) allowFunc {
		st := must(uluredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: "ulule", MaxRetry: 3}))
		l := ulule.New(st, ulule.Rate{Period: period, Limit: quota})
		return func(k string) bool { r, err := l.Get(ctx, k); return err == nil && !r.Reached }
	}
}

// floorScript is the least a script call costs: EVALSHA of a script that
// looks one key up and returns a five-element array, as the
// limiters' replies are.
var floorScript = redis.NewScript(`redis.call('EXISTS', KEYS[1]) return {1, 0, 0, 0, 0}`)

// rawScript decides nothing: the floor row, one EVALSHA per request.
func rawScript(c redis.UniversalClient) allowFunc {
	return func(k string) bool {
		return floorScript.Run(ctx, c, []string{k}, 1).Err() == nil
	}
}

// cpuCases: every limitkit algorithm single-limit and the multi-limit
// shapes, next to the peers' scripts for the same algorithm. A peer with
// two limits makes two decisions (two script calls), so the multi-limit
// rows compare with twice the peer's single-limit row.
var cpuCases = []cpuCase{
	{"floor", "raw", rawScript},
	{"gcra", "limitkit", kitRedis(core.Policy{Name: "gcra", Algorithm: core.GCRA, Limits: []core.Limit{rateLimit(time.Hour)}})},
	{"gcra", "redis_rate", redisRate(time.Hour)},
	{"fixed_window", "limitkit", kitRedis(core.Policy{Name: "fixed", Algorithm: core.FixedWindow, Limits: []core.Limit{rateLimit(time.Hour)}})},
	{"fixed_window", "ulule", ululeRedis(time.Hour)},
	{"token_bucket", "limitkit", kitRedis(core.Policy{Name: "tb", Algorithm: core.TokenBucket, Limits: []core.Limit{rateLimit(time.Hour)}})},
	{"sliding_log", "limitkit", kitRedis(core.Policy{Name: "log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(1000, time.Minute)}})},
	{"sliding_counter", "limitkit", kitRedis(core.Policy{Name: "sc", Algorithm: core.SlidingWindowCounter, Buckets: 60, Limits: []core.Limit{rateLimit(time.Hour)}})},
	{"gcra_2limits", "limitkit", kitRedis(core.Policy{Name: "gcra2", Algorithm: core.GCRA, Limits: []core.Limit{rateLimit(time.Hour), core.Per(quota/10, 10*time.Minute)}})},
	{"fixed_window_2limits", "limitkit", kitRedis(core.Policy{Name: "fixed2", Algorithm: core.FixedWindow, Limits: []core.Limit{rateLimit(time.Hour), core.Per(quota/10, 10*time.Minute)}})},
	{"sliding_log_2limits", "limitkit", kitRedis(core.Policy{Name: "log2", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(1000, time.Minute), core.Per(100, time.Second)}})},
}

// BenchmarkRedisCPU reports, per decision on a key that exists (keys
// rotate over cpuUsers users per row, each decided once beforehand):
//
//   - redis-µs:<alg>:<lib>: the time Redis spent inside the script calls
//     (INFO commandstats, usec of EVALSHA and EVAL) per decision;
//   - server-µs:<alg>:<lib>: redis-server's CPU time (INFO cpu) per
//     decision, which adds reading, parsing and answering the command;
//   - x:<alg>:<peer>: limitkit's redis-µs over the peer's (for the
//     multi-limit rows: over twice the peer's, a peer's two decisions);
//   - scripts/op: script calls per decision, over all rows (1: every
//     library makes one script call per decision).
//
// All rows run in the same loop, round robin, cpuChunk decisions at a
// time (b.N rounds), so a slow second on a shared machine slows every row
// alike; the figures are the medians over the rounds, and each ratio is
// the median of the ratios within a round. commandstats times calls with
// the wall clock, so a call during which Redis lost its CPU counts the
// wait too; the median over rounds leaves such stalls out.
func BenchmarkRedisCPU(b *testing.B) {
	c := startRedis(b)
	if err := c.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	keys := make([]string, cpuUsers)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	allows := make([]allowFunc, len(cpuCases))
	for j, cc := range cpuCases {
		allows[j] = cc.new(c)
		for _, k := range keys {
			if !allows[j](k) {
				b.Fatalf("%s/%s denied %s under a never-binding quota: misconfigured", cc.alg, cc.lib, k)
			}
		}
	}
	// the CPU of one INFO, which every chunk's server CPU includes
	var infoCPU []float64
	prev := readStats(b, c)
	for range 32 {
		s := readStats(b, c)
		infoCPU = append(infoCPU, float64(s.cpu-prev.cpu))
		prev = s
	}
	infoCost := median(infoCPU)

	usec := make([][]float64, len(cpuCases))
	cpu := make([][]float64, len(cpuCases))
	var calls, decisions float64
	var denied int64
	next := 0
	b.ResetTimer()
	for b.Loop() {
		for j := range cpuCases {
			s0 := readStats(b, c)
			for range cpuChunk {
				if !allows[j](keys[next%cpuUsers]) {
					denied++
				}
				next++
			}
			s1 := readStats(b, c)
			usec[j] = append(usec[j], (s1.usec-s0.usec)/cpuChunk)
			cpu[j] = append(cpu[j], (float64(s1.cpu-s0.cpu)-infoCost)/1e3/cpuChunk)
			calls += s1.calls - s0.calls
			decisions += cpuChunk
		}
	}
	b.StopTimer()
	mustAdmit(b, denied)
	for j, cc := range cpuCases {
		b.ReportMetric(median(usec[j]), "redis-µs:"+cc.alg+":"+cc.lib)
		b.ReportMetric(median(cpu[j]), "server-µs:"+cc.alg+":"+cc.lib)
	}
	b.ReportMetric(calls/decisions, "scripts/op")
	ratio := func(name string, kit, peer int, times float64) {
		r := make([]float64, len(usec[kit]))
		for i := range r {
			r[i] = usec[kit][i] / (times * usec[peer][i])
		}
		b.ReportMetric(median(r), "x:"+name)
	}
	ix := func(alg, lib string) int {
		return slices.IndexFunc(cpuCases, func(cc cpuCase) bool { return cc.alg == alg && cc.lib == lib })
	}
	ratio("gcra:redis_rate", ix("gcra", "limitkit"), ix("gcra", "redis_rate"), 1)
	ratio("fixed_window:ulule", ix("fixed_window", "limitkit"), ix("fixed_window", "ulule"), 1)
	ratio("gcra_2limits:2xredis_rate", ix("gcra_2limits", "limitkit"), ix("gcra", "redis_rate"), 2)
	ratio("fixed_window_2limits:2xulule", ix("fixed_window_2limits", "limitkit"), ix("fixed_window", "ulule"), 2)
}

// cpuChunk is the number of decisions per measured chunk.
const cpuChunk = 50

type redisStats struct {
	calls, usec float64       // EVALSHA and EVAL, cumulative
	cpu         time.Duration // used_cpu_user + used_cpu_sys
}

// readStats reads INFO cpu and commandstats in one command.
func readStats(b *testing.B, c *redis.Client) redisStats {
	b.Helper()
	info, err := c.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s redisStats
	var sec float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_user", "used_cpu_sys":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			sec += x
		case "cmdstat_evalsha", "cmdstat_eval":
			for _, f := range strings.Split(v, ",") {
				fk, fv, _ := strings.Cut(f, "=")
				x, err := strconv.ParseFloat(fv, 64)
				if err != nil {
					continue
				}
				switch fk {
				case "calls":
					s.calls += x
				case "usec":
					s.usec += x
				}
			}
		}
	}
	s.cpu = time.Duration(sec * 1e9)
	return s
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
