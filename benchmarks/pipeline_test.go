package benchmarks

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

// kitGCRA is a limitkit GCRA Limiter on the Redis store, pipelined or not.
func kitGCRA(opts ...redisstore.Option) func(c redis.UniversalClient) allowFunc {
	return func(c redis.UniversalClient) allowFunc {
		st := must(redisstore.New(c, opts...))
		l := must(core.NewLimiter(st, core.Policy{Name: "pipe", Limits: []core.Limit{core.Per(quota, quotaWin)}}, core.WithTimeout(5*time.Second)))
		return func(k string) bool { d, err := l.Allow(ctx, k); return err == nil && d.Allowed }
	}
}

// pipeLibs are the rows of BenchmarkPipelining, in the order they run
// (pipelined last: it reports its ratios to the rows before it).
var pipeLibs = []struct {
	name string
	new  func(c redis.UniversalClient) allowFunc
}{
	{"plain", kitGCRA()},
	{"redis_rate", redisRate(quotaWin)},
	{"ulule", ululeRedis(quotaWin)},
	{"pipelined", kitGCRA(redisstore.WithPipelining(redisstore.Pipelining{}))},
}

// pipeResult is one row's figures, for the pipelined row's ratios.
type pipeResult struct{ perSec, p99 float64 }

// BenchmarkPipelining compares exact-mode GCRA decisions without and with
// redisstore.WithPipelining, next to redis_rate (GCRA) and ulule (fixed
// window), on one node (one hot key, as one abusive client) and on a
// three-master Cluster (1,024 keys over the masters), with 1, 64 and
// 1,024 goroutines sharing one client (PoolSize 64). b.N decisions are
// shared among the goroutines; per row:
//
//   - ns/op: wall time per decision (all goroutines together);
//   - decisions/s and p50-µs, p99-µs: the latency of one decision;
//   - redis-µs/op: Redis's time inside the script calls per decision (INFO
//     commandstats usec/calls of EVALSHA and EVAL, summed over the
//     masters), and floor-decisions/s: what the servers' threads allow at
//     that cost (masters × 10^6 / redis-µs/op);
//   - scripts/op: script calls per decision (1 for every library);
//   - on the pipelined row: x-plain and x-redis_rate (its decisions/s over
//     theirs, same run), floor/x (floor-decisions/s over its own
//     decisions/s: 1 means Redis's CPU is the only limit) and p99/plain.
//
// go test -run '^$' -bench BenchmarkPipelining -benchtime 2s ./benchmarks/
func BenchmarkPipelining(b *testing.B) {
	node := redistest.StartNode(b)
	cl := redistest.StartCluster(b)
	nc := redis.NewClient(&redis.Options{Addr: node.Addr, PoolSize: 64, ContextTimeoutEnabled: true})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { nc.Close(); cc.Close() })
	targets := []struct {
		name    string
		client  redis.UniversalClient
		servers []*redistest.Server
		keys    int
	}{
		{"node", nc, []*redistest.Server{node}, 1},
		{"cluster", cc, cl.Nodes, 1024},
	}
	results := map[string]pipeResult{}
	for _, tg := range targets {
		keys := make([]string, tg.keys)
		for i := range keys {
			keys[i] = "user:" + strconv.Itoa(42+i)
		}
		for _, conc := range []int{1, 64, 1024} {
			for _, lib := range pipeLibs {
				row := fmt.Sprintf("%s/c=%d", tg.name, conc)
				b.Run(row+"/lib="+lib.name, func(b *testing.B) {
					allow := lib.new(tg.client)
					checkAdmits(b, allow)
					for _, k := range keys {
						allow(k) // every key exists: the steady state
					}
					s0 := scriptStats(b, tg.servers)
					lat, elapsed, denied := runConcurrent(b, conc, allow, keys)
					s1 := scriptStats(b, tg.servers)
					mustAdmit(b, denied)
					perSec := float64(b.N) / elapsed.Seconds()
					p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
					calls, usec := s1.calls-s0.calls, s1.usec-s0.usec
					b.ReportMetric(perSec, "decisions/s")
					b.ReportMetric(p50, "p50-µs")
					b.ReportMetric(p99, "p99-µs")
					b.ReportMetric(calls/float64(b.N), "scripts/op")
					if calls > 0 && usec > 0 {
						b.ReportMetric(usec/calls, "redis-µs/op")
						floor := float64(len(tg.servers)) * 1e6 / (usec / calls)
						b.ReportMetric(floor, "floor-decisions/s")
						if lib.name == "pipelined" {
							b.ReportMetric(floor/perSec, "floor/x")
						}
					}
					results[row+"/"+lib.name] = pipeResult{perSec, p99}
					if lib.name == "pipelined" {
						if r, ok := results[row+"/plain"]; ok {
							b.ReportMetric(perSec/r.perSec, "x-plain")
							b.ReportMetric(p99/r.p99, "p99/plain")
						}
						if r, ok := results[row+"/redis_rate"]; ok {
							b.ReportMetric(perSec/r.perSec, "x-redis_rate")
						}
					}
				})
			}
		}
	}
}

// runConcurrent makes b.N decisions with conc goroutines, goroutine g
// deciding keys g, g+conc, ... modulo len(keys), and returns every
// decision's latency in µs, the wall time and the denials.
func runConcurrent(b *testing.B, conc int, allow allowFunc, keys []string) ([]float64, time.Duration, int64) {
	var next, denied atomic.Int64
	lats := make([][]float64, conc)
	var wg sync.WaitGroup
	n := int64(b.N)
	b.ResetTimer()
	start := time.Now()
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]float64, 0, b.N/conc+1)
			for i := g; next.Add(1) <= n; i += conc {
				t0 := time.Now()
				if !allow(keys[i%len(keys)]) {
					denied.Add(1)
				}
				mine = append(mine, float64(time.Since(t0).Nanoseconds())/1e3)
			}
			lats[g] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return slices.Concat(lats...), elapsed, denied.Load()
}

// percentile is the q-quantile of xs (sorted in place).
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

// scriptStats sums EVALSHA's and EVAL's calls and usec over servers
// (INFO commandstats).
func scriptStats(b *testing.B, servers []*redistest.Server) (s struct{ calls, usec float64 }) {
	b.Helper()
	for _, srv := range servers {
		info, err := srv.Do("INFO", "commandstats")
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || (k != "cmdstat_evalsha" && k != "cmdstat_eval") {
				continue
			}
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
	return s
}
