package fleet

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// hotPolicy never denies within a benchmark.
var hotPolicy = core.Policy{Name: "hot", Limits: []core.Limit{core.Per(1<<30, 30*24*time.Hour)}}

// evalCalls reads the server's count of EVALSHA and EVAL calls (INFO
// commandstats): what Redis executed, whatever the client sent.
func evalCalls(b testing.TB, srv *redistest.Server) int64 {
	b.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		i := strings.Index(line, "calls=")
		j := strings.IndexByte(line[i:], ',')
		v, err := strconv.ParseInt(line[i+6:i+j], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		n += v
	}
	return n
}

// target is a Redis node or Cluster under benchmark.
type target struct {
	servers []*redistest.Server
	client  func() redis.UniversalClient
}

func nodeTarget(srv *redistest.Server) target {
	return target{[]*redistest.Server{srv}, func() redis.UniversalClient {
		opt := srv.ClientOptions()
		opt.PoolSize = 32
		return redis.NewClient(opt)
	}}
}

func clusterTarget(cl *redistest.Cluster) target {
	return target{cl.Nodes, func() redis.UniversalClient {
		opt := cl.ClusterOptions()
		opt.PoolSize = 32
		return redis.NewClusterClient(opt)
	}}
}

// calls is the script calls over every server.
func (tg target) calls(b testing.TB) (n int64) {
	for _, s := range tg.servers {
		n += evalCalls(b, s)
	}
	return n
}

// fleetOf builds n stores over tg, each with its own client: plain Redis
// stores (tier false) or tiers in front of them with opts.
func fleetOf(b testing.TB, tg target, n int, tier bool, opts ...Option) []core.Store {
	b.Helper()
	out := make([]core.Store, n)
	for i := range out {
		c := tg.client()
		b.Cleanup(func() { _ = c.Close() })
		rs, err := redisstore.New(c)
		if err != nil {
			b.Fatal(err)
		}
		if err := rs.Preload(context.Background()); err != nil {
			b.Fatal(err)
		}
		out[i] = rs
		if tier {
			s, err := newFleet(rs, opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			out[i] = s
		}
	}
	return out
}

// runFleet runs b.N decisions of cost 1 on key from 4 stores × 16
// goroutines (goroutine i uses store i mod 4) and reports decisions/s,
// Redis script calls per decision (server-side count) and the share
// denied.
func runFleet(b *testing.B, tg target, stores []core.Store, p *core.Policy, key string) {
	b.Helper()
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	var next, denied atomic.Int64
	ctx := context.Background()
	before := tg.calls(b)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		s := stores[int(next.Add(1))%len(stores)]
		for pb.Next() {
			d, err := s.Take(ctx, key, p, time.Now(), 1)
			if err != nil {
				b.Error(err)
				return
			}
			if !d.Allowed {
				denied.Add(1)
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	calls := tg.calls(b) - before
	b.ReportMetric(float64(b.N)/el.Seconds(), "decisions/s")
	b.ReportMetric(float64(calls)/float64(b.N), "redis-cmds/decision")
	b.ReportMetric(float64(denied.Load())/float64(b.N), "denied/decision")
}

// BenchmarkRedisHotKey: one hot key, 4 store instances × 16 goroutines on
// one Redis node: the plain Redis store, the tier in exact mode, and the
// tier in write-back mode (sync 100ms, default lease cap); on a node and
// on the three-master Cluster.
func BenchmarkRedisHotKey(b *testing.B) {
	b.Run("node", func(b *testing.B) { benchHotKey(b, nodeTarget(redistest.StartNode(b))) })
	b.Run("cluster", func(b *testing.B) { benchHotKey(b, clusterTarget(redistest.StartCluster(b))) })
}

func benchHotKey(b *testing.B, tg target) {
	for _, c := range []struct {
		name string
		tier bool
		opts []Option
	}{
		{"plain", false, nil},
		{"exact", true, nil},
		{"write-back", true, []Option{WithSync(100 * time.Millisecond)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			stores := fleetOf(b, tg, 4, c.tier, c.opts...)
			p := hotPolicy
			runFleet(b, tg, stores, &p, "hot-"+c.name)
		})
	}
}

// BenchmarkRedisHammer: a client over its limit (1 per hour) keeps
// hammering from 4 store instances × 16 goroutines: the plain Redis store
// against the tier in exact mode, whose deny cache answers.
func BenchmarkRedisHammer(b *testing.B) {
	tg := nodeTarget(redistest.StartNode(b))
	for _, c := range []struct {
		name string
		tier bool
	}{{"plain", false}, {"exact+deny-cache", true}} {
		b.Run(c.name, func(b *testing.B) {
			stores := fleetOf(b, tg, 4, c.tier)
			p := core.Policy{Name: "hammer", Limits: []core.Limit{core.PerHour(1)}}
			runFleet(b, tg, stores, &p, "hammer-"+c.name)
		})
	}
}

// BenchmarkFloodOfKeys: every request a new key (write-back over the
// in-memory fake), so each one inserts into the full local table and
// evicts: the worst case of the bounded table.
func BenchmarkFloodOfKeys(b *testing.B) {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "client:" + strconv.Itoa(i)
	}
	for _, tiered := range []bool{false, true} {
		name := "fake-direct"
		if tiered {
			name = "tier"
		}
		b.Run(name, func(b *testing.B) {
			var s core.Store = batchFake{newFake()}
			var tier *fleetStore
			if tiered {
				tier = newTier(b, s, WithSync(time.Second), WithMaxKeys(1<<14))
				s = tier
			}
			p := hotPolicy
			now := time.Unix(1_900_000_000, 0)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, _ = s.Take(ctx, keys[i&(1<<20-1)], &p, now, 1)
			}
			b.StopTimer()
			if tier != nil {
				n := 0
				for i := range tier.shards {
					n += len(tier.shards[i].m)
				}
				b.ReportMetric(float64(n), "entries")
			}
		})
	}
}

// BenchmarkTierOverhead measures the tier alone over the in-memory fake
// remote (no network): the fake called directly, the tier passing an
// admitted request through (exact), a deny-cache hit, and a write-back
// lease hit; serial and parallel.
//
// Take keeps its table loop in its own body: moving the loop into a
// method of its own (one more call, eleven argument words, the Decision
// copied back through two frames) cost 10 ns (+20 %) on the deny-cache
// hit and the lease hit, 51 → 61 ns, in an interleaved A/B of the two
// shapes in one process. So does the deny cache's TTL, read last in
// deniesCached's condition: passed in as an argument it was read on
// every request and cost 1 ns on the lease hit.
func BenchmarkTierOverhead(b *testing.B) {
	ctx := context.Background()
	deny := core.Policy{Name: "deny", Limits: []core.Limit{core.PerHour(1)}}
	for _, c := range []struct {
		name string
		p    core.Policy
		opts []Option
		tier bool
	}{
		{"fake-direct", hotPolicy, nil, false},
		{"exact-pass-through", hotPolicy, nil, true},
		{"deny-cache-hit", deny, nil, true},
		{"write-back-lease", hotPolicy, []Option{WithSync(100 * time.Millisecond)}, true},
	} {
		for _, par := range []bool{false, true} {
			name := c.name
			if par {
				name += "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				f := newFake()
				var s core.Store = batchFake{f}
				if c.tier {
					s = newTier(b, batchFake{f}, c.opts...)
				}
				p := c.p
				now := time.Unix(1_900_000_000, 0)
				for i := 0; i < 4; i++ {
					_, _ = s.Take(ctx, "k", &p, now, 1) // warm: cache the denial, grow the lease
				}
				b.ReportAllocs()
				b.ResetTimer()
				if !par {
					for i := 0; i < b.N; i++ {
						_, _ = s.Take(ctx, "k", &p, now, 1)
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						_, _ = s.Take(ctx, "k", &p, now, 1)
					}
				})
			})
		}
	}
}

// BenchmarkRedisHotKeySerial: one goroutine, one store, one hot key on a
// Redis node: the plain store, the tier exact, the tier write-back.
func BenchmarkRedisHotKeySerial(b *testing.B) {
	tg := nodeTarget(redistest.StartNode(b))
	for _, c := range []struct {
		name string
		tier bool
		opts []Option
	}{
		{"plain", false, nil},
		{"exact", true, nil},
		{"write-back", true, []Option{WithSync(100 * time.Millisecond)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := fleetOf(b, tg, 1, c.tier, c.opts...)[0]
			p := hotPolicy
			ctx := context.Background()
			key := "serial-" + c.name
			before := tg.calls(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Take(ctx, key, &p, time.Now(), 1); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(tg.calls(b)-before)/float64(b.N), "redis-cmds/decision")
		})
	}
}
