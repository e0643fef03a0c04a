package rls

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

const benchConfig = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 1000000
  - key: path
    rate_limit:
      unit: year
      requests_per_unit: 2000000000
`

func benchServer(b *testing.B, st core.Store, opts ...Option) *Server {
	b.Helper()
	cfg, err := ParseConfig(map[string][]byte{"b.yaml": []byte(benchConfig)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(st, cfg, append([]Option{WithLimiterOptions(core.WithTimeout(redistest.StoreTimeout))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// runBench decides one or two descriptors per request over 1024 keys
// (RLS_BENCH_KEYS=n: n keys, e.g. 64 hot keys as the side-by-side test's),
// serially and from parallel goroutines.
func runBench(b *testing.B, s *Server) {
	nkeys := 1024
	if v, err := strconv.Atoi(os.Getenv("RLS_BENCH_KEYS")); err == nil && v > 0 {
		nkeys = v
	}
	reqs := make([][2]*pb.RateLimitRequest, nkeys)
	for i := range reqs {
		ip := "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
		reqs[i][0] = request("bench", desc("remote_address", ip))
		reqs[i][1] = request("bench", desc("remote_address", ip), desc("path", "/api/"+strconv.Itoa(i%16)))
	}
	ctx := context.Background()
	for _, n := range []int{1, 2} {
		name := strconv.Itoa(n) + "descriptor"
		b.Run(name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.ShouldRateLimit(ctx, reqs[i%len(reqs)][n-1]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					if _, err := s.ShouldRateLimit(ctx, reqs[i%int64(len(reqs))][n-1]); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func BenchmarkShouldRateLimitEmbedded(b *testing.B) {
	st := memstore.MustNew()
	defer st.Close()
	runBench(b, benchServer(b, st))
}

// BenchmarkShouldRateLimitEmbeddedNoHeaders is the embedded store's
// decisions without response headers (the side-by-side test's
// -headers=false): the answer's own allocation.
func BenchmarkShouldRateLimitEmbeddedNoHeaders(b *testing.B) {
	st := memstore.MustNew()
	defer st.Close()
	runBench(b, benchServer(b, st, WithHeaders(false)))
}

func benchRedis(b *testing.B, sync bool) {
	srv := redistest.StartNode(b)
	opts := srv.ClientOptions()
	client := redis.NewClient(opts)
	defer client.Close()
	rs, err := redisstore.New(client)
	if err != nil {
		b.Fatal(err)
	}
	var st core.Store = rs
	if sync {
		tier, err := fleet.New(rs, fleet.WithSync(100_000_000))
		if err != nil {
			b.Fatal(err)
		}
		defer tier.Close()
		st = tier
	}
	runBench(b, benchServer(b, st))
}

func BenchmarkShouldRateLimitRedis(b *testing.B)      { benchRedis(b, false) }
func BenchmarkShouldRateLimitRedisFleet(b *testing.B) { benchRedis(b, true) }
