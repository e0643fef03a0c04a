package benchmarks

import (
	"context"
	"fmt"
	"os/exec"
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

// pipeLibs are the libraries of BenchmarkPipelining, in the order they
// take turns (each opens a round in turn; the ratios read them at these
// indexes).
var pipeLibs = []struct {
	name string
	new  func(c redis.UniversalClient) allowFunc
}{
	{"plain", kitGCRA()},
	{"pipelined", kitGCRA(redisstore.WithPipelining(redisstore.Pipelining{}))},
	{"redis_rate", redisRate(quotaWin)},
	{"ulule", ululeRedis(quotaWin)},
}

// BenchmarkPipelining compares exact-mode GCRA decisions without
// ("plain") and with redisstore.WithPipelining ("pipelined"), next to
// redis_rate (GCRA) and ulule (fixed window), on one node (one hot key,
// as one abusive client) and on a three-master Cluster (1,024 keys over
// the masters), with 1, 64 and 1,024 goroutines sharing one client
// (PoolSize 64).
//
// The libraries take turns: a round runs every library for the same
// wall time (turn, 100 ms: the goroutines start deciding, and stop
// starting new decisions when it has passed), each library opening a
// round in turn (at one goroutine on the node, the turn after the
// reference below ran about a quarter faster, whichever library had it),
// and each of the b.N
// iterations runs rounds until every library made at least 4,000
// decisions, so a slow second on a shared machine slows them alike; each
// figure is the median over the rounds, and each ratio the median of the
// ratios within a round. A turn measures the steady state: the
// goroutines' start and the last decisions' drain take a few of its
// milliseconds (with turns of a fixed 1,024 decisions, 8 ms at 64
// goroutines, they were a fifth of the time). Per library:
//
//   - <lib>-decisions/s, and <lib>-p50-µs, <lib>-p99-µs: one decision's
//     latency;
//   - <lib>-redis-µs/op: Redis's time inside the script calls per
//     decision (INFO commandstats usec/calls of EVALSHA and EVAL, over
//     the masters);
//   - <lib>-server-cpu-µs/op: the servers' whole CPU per decision (INFO
//     cpu: the scripts plus reading, parsing and answering), and
//     <lib>-client-cpu-µs/op: this process's (the library, go-redis, the
//     goroutines; 0 off Linux);
//   - <lib>-redis-on-cpu-%: the share of the wall time redis-server's
//     event loop spent on a CPU, and <lib>-redis-runq-%: spent ready to
//     run but waiting for a CPU that other processes held (the mean over
//     the masters, from /proc/<pid>/task/<pid>/schedstat; 0 off Linux):
//     what is left of 100 % Redis sat idle, waiting for commands;
//
// and for the pipelined library: x-plain and x-redis_rate (its
// decisions/s over theirs), p99/plain, and floor/x: the decisions/s
// Redis's CPU allows at its redis-µs/op (masters × 10^6 / redis-µs/op)
// over the decisions/s it made (1: Redis's CPU is the only limit).
// scripts/op is script calls per decision over every library (1).
//
// On one node, each round also runs the reference: redis-benchmark (the
// C client that comes with redis-server) sending the very EVALSHA the
// store sends, with as many requests in flight as there are goroutines
// (min(4, goroutines) connections, pipelining the rest), for as many
// requests as the pipelined library decided in its turn (at least 5,000:
// redis-benchmark times its run in whole milliseconds); ref-floor/x is
// its floor/x, ref-decisions/s its rate (as redis-benchmark measures it).
// It shows how near to the floor a client that costs next to nothing
// gets on the same machine: Redis also spends CPU outside the script
// (reading, parsing, answering), which the floor leaves out. The
// reference is left out, with a log line, where redis-benchmark is not
// installed.
//
//	cd benchmarks && go test -run '^$' -bench BenchmarkPipelining -benchtime 5x .
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
	for _, tg := range targets {
		keys := make([]string, tg.keys)
		for i := range keys {
			keys[i] = "user:" + strconv.Itoa(42+i)
		}
		for _, conc := range []int{1, 64, 1024} {
			b.Run(fmt.Sprintf("%s/c=%d", tg.name, conc), func(b *testing.B) {
				b.ReportAllocs()
				allows := make([]allowFunc, len(pipeLibs))
				for j, lib := range pipeLibs {
					allows[j] = lib.new(tg.client)
					checkAdmits(b, allows[j])
					for _, k := range keys {
						allows[j](k) // every key exists: the steady state
					}
				}
				type figs struct{ perSec, p50, p99, usec, client, server, oncpu, runq []float64 }
				res := make([]figs, len(pipeLibs))
				var ratios [4][]float64 // x-plain, x-redis_rate, p99/plain, floor/x
				var refArgs []string    // the store's EVALSHA, for the reference
				var refFloor, refPerSec []float64
				if len(tg.servers) == 1 {
					refArgs = storeScript(b, tg.servers[0].Addr, keys[0])
				}
				var calls, decisions float64
				denied := make([]int64, len(pipeLibs))
				round := 0
				b.ResetTimer()
				for b.Loop() {
					made := make([]int, len(pipeLibs)) // this iteration's decisions per library
					for slices.Min(made) < 4000 {
						round++
						for o := range pipeLibs {
							j := (o + round) % len(pipeLibs) // each library opens a round in turn
							s0, c0 := scriptStats(b, tg.servers), processCPU()
							lat, elapsed, d := runConcurrent(conc, turn, allows[j], keys)
							c1, s1 := processCPU(), scriptStats(b, tg.servers)
							n := float64(len(lat))
							made[j] += len(lat)
							denied[j] += d
							calls += s1.calls - s0.calls
							decisions += n
							r := &res[j]
							r.perSec = append(r.perSec, n/elapsed.Seconds())
							r.p50 = append(r.p50, percentile(lat, 0.50))
							r.p99 = append(r.p99, percentile(lat, 0.99))
							r.usec = append(r.usec, (s1.usec-s0.usec)/max(1, s1.calls-s0.calls))
							r.client = append(r.client, float64((c1-c0).Nanoseconds())/1e3/n)
							r.server = append(r.server, (s1.cpu-s0.cpu)*1e6/n)
							wall := elapsed.Seconds() * float64(len(tg.servers)) / 100
							r.oncpu = append(r.oncpu, (s1.run-s0.run)/wall)
							r.runq = append(r.runq, (s1.wait-s0.wait)/wall)
						}
						last := func(j int) (perSec, p99, usec float64) {
							r := res[j]
							n := len(r.perSec) - 1
							return r.perSec[n], r.p99[n], r.usec[n]
						}
						plain, plain99, _ := last(0)
						pp, p99, usec := last(1)
						rr, _, _ := last(2)
						ratios[0] = append(ratios[0], pp/plain)
						ratios[1] = append(ratios[1], pp/rr)
						ratios[2] = append(ratios[2], p99/plain99)
						ratios[3] = append(ratios[3], float64(len(tg.servers))*1e6/usec/pp)
						if refArgs != nil {
							perSec, usec := reference(b, tg.servers[0], refArgs, conc, int(pp*turn.Seconds()))
							refPerSec = append(refPerSec, perSec)
							refFloor = append(refFloor, 1e6/usec/perSec)
						}
					}
				}
				b.StopTimer()
				for j, lib := range pipeLibs {
					if denied[j] > 0 {
						b.Errorf("%s: %d decisions denied or failed (a never-binding quota, a 5 s deadline)", lib.name, denied[j])
					}
				}
				for j, lib := range pipeLibs {
					b.ReportMetric(median(res[j].perSec), lib.name+"-decisions/s")
					b.ReportMetric(median(res[j].p50), lib.name+"-p50-µs")
					b.ReportMetric(median(res[j].p99), lib.name+"-p99-µs")
					b.ReportMetric(median(res[j].usec), lib.name+"-redis-µs/op")
					b.ReportMetric(median(res[j].client), lib.name+"-client-cpu-µs/op")
					b.ReportMetric(median(res[j].server), lib.name+"-server-cpu-µs/op")
					b.ReportMetric(median(res[j].oncpu), lib.name+"-redis-on-cpu-%")
					b.ReportMetric(median(res[j].runq), lib.name+"-redis-runq-%")
				}
				for i, name := range []string{"x-plain", "x-redis_rate", "p99/plain", "floor/x"} {
					b.ReportMetric(median(ratios[i]), name)
				}
				b.ReportMetric(calls/decisions, "scripts/op")
				if len(refFloor) > 0 {
					b.ReportMetric(median(refPerSec), "ref-decisions/s")
					b.ReportMetric(median(refFloor), "ref-floor/x")
				}
			})
		}
	}
}

// storeScript returns the arguments of the EVALSHA a GCRA Limiter on the
// node at addr sends for key (the same with and without pipelining), its
// script loaded, or nil with a log line when redis-benchmark is not
// installed.
func storeScript(b *testing.B, addr, key string) []string {
	b.Helper()
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		b.Logf("no reference: redis-benchmark is not installed (%v)", err)
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var args []string
	c.AddHook(evalshaHook(func(a []any) {
		args = args[:0]
		for _, x := range a {
			args = append(args, fmt.Sprint(x))
		}
	}))
	if !kitGCRA()(c)(key) || len(args) == 0 {
		b.Fatalf("reference: no EVALSHA seen for %s (args %q)", key, args)
	}
	return args
}

// evalshaHook is a go-redis hook that hands f the arguments of each
// EVALSHA its client sends alone.
type evalshaHook func(args []any)

func (h evalshaHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h evalshaHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h(cmd.Args())
		}
		return next(ctx, cmd)
	}
}

func (h evalshaHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// reference runs redis-benchmark against srv: n times args, with conc
// requests in flight over min(4, conc) connections, and returns the
// requests per second it measured and the script's µs per call in INFO
// commandstats over the run.
func reference(b *testing.B, srv *redistest.Server, args []string, conc, n int) (perSec, usec float64) {
	b.Helper()
	conns := min(4, conc)
	cmdArgs := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port),
		"-c", strconv.Itoa(conns), "-P", strconv.Itoa(conc / conns),
		"-n", strconv.Itoa(max(n, 5000)), "--csv"}, args...)
	s0 := scriptStats(b, []*redistest.Server{srv})
	out, err := exec.Command("redis-benchmark", cmdArgs...).CombinedOutput()
	s1 := scriptStats(b, []*redistest.Server{srv})
	if err != nil || strings.Contains(string(out), "Error") {
		b.Fatalf("redis-benchmark %q: %v\n%s", cmdArgs, err, out)
	}
	// --csv: a header line, then "test","rps",...
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fields := strings.Split(lines[len(lines)-1], ",")
	if len(fields) < 2 {
		b.Fatalf("redis-benchmark: unexpected output %q", out)
	}
	perSec, err = strconv.ParseFloat(strings.Trim(fields[1], `"`), 64)
	if err != nil || s1.calls-s0.calls < float64(n) {
		b.Fatalf("redis-benchmark: rps %q (%v), %v script calls for %d requests", fields[1], err, s1.calls-s0.calls, n)
	}
	return perSec, (s1.usec - s0.usec) / (s1.calls - s0.calls)
}

// turn is how long each library decides in a round of BenchmarkPipelining.
const turn = 100 * time.Millisecond

// runConcurrent makes decisions with conc goroutines for d (each starts
// no decision after d has passed), goroutine g deciding keys g, g+conc,
// ... modulo len(keys), and returns every decision's latency in µs, the
// wall time until the last decision returned and the denials.
func runConcurrent(conc int, d time.Duration, allow allowFunc, keys []string) ([]float64, time.Duration, int64) {
	var denied atomic.Int64
	lats := make([][]float64, conc)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []float64
			for i, t0 := g, time.Now(); t0.Before(end); i += conc {
				if !allow(keys[i%len(keys)]) {
					denied.Add(1)
				}
				t1 := time.Now()
				mine = append(mine, float64(t1.Sub(t0).Nanoseconds())/1e3)
				t0 = t1
			}
			lats[g] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
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

// scriptStats sums EVALSHA's and EVAL's calls and usec (INFO
// commandstats), the servers' CPU seconds (INFO cpu) and their event
// loops' seconds on a CPU and waiting for one (threadSched) over servers.
func scriptStats(b *testing.B, servers []*redistest.Server) (s struct{ calls, usec, cpu, run, wait float64 }) {
	b.Helper()
	for _, srv := range servers {
		info, err := srv.Do("INFO", "server", "cpu", "commandstats")
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if k == "process_id" {
				run, wait := threadSched(v)
				s.run += run.Seconds()
				s.wait += wait.Seconds()
			}
			if k == "used_cpu_user" || k == "used_cpu_sys" {
				x, _ := strconv.ParseFloat(v, 64)
				s.cpu += x
			}
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
