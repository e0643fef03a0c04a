package memstore

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
)

var benchPolicies = []core.Policy{
	{Name: "gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(1<<30, 30*24*time.Hour)}},
	{Name: "token_bucket", Algorithm: core.TokenBucket, Limits: []core.Limit{core.Per(1<<30, 30*24*time.Hour)}},
	{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(1 << 30)}},
	{Name: "sliding_counter", Algorithm: core.SlidingWindowCounter, Buckets: 60, Limits: []core.Limit{core.PerHour(1 << 30)}},
	{Name: "sliding_log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(100_000, time.Hour)}},
	{Name: "two_limits_gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(1<<28, 15*time.Minute), core.PerMinute(1 << 25)}},
}

// BenchmarkHotKey decides for one key, allowed every time (the limits are
// far above the request count; the sliding log is kept allowed by time
// moving a window per 100,000 requests).
func BenchmarkHotKey(b *testing.B) {
	for _, p := range benchPolicies {
		b.Run(p.Name, func(b *testing.B) {
			s := mustNew()
			defer s.Close()
			ctx := context.Background()
			pp := &p
			now := time.Unix(1_700_000_000, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if p.Algorithm == core.SlidingWindowLog && i%50_000 == 0 {
					now = now.Add(time.Hour)
				}
				d, _ := s.Take(ctx, "user:42", pp, now, 1)
				if !d.Allowed {
					b.Fatal("denied")
				}
			}
		})
	}
}

// BenchmarkHotKeyParallel runs the same over GOMAXPROCS goroutines, each on
// its own key (distinct keys spread over shards: no global lock).
func BenchmarkHotKeyParallel(b *testing.B) {
	for _, p := range benchPolicies {
		if p.Algorithm == core.SlidingWindowLog {
			continue
		}
		b.Run(p.Name, func(b *testing.B) {
			s := mustNew()
			defer s.Close()
			ctx := context.Background()
			pp := &p
			now := time.Unix(1_700_000_000, 0)
			var id atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := "user:" + strconv.FormatInt(id.Add(1), 10)
				for pb.Next() {
					if d, _ := s.Take(ctx, key, pp, now, 1); !d.Allowed {
						b.Error("denied")
						return
					}
				}
			})
		})
	}
}

// BenchmarkMillionKeys decides once for each of 1,000,000 distinct keys and
// reports the heap held per key afterwards.
func BenchmarkMillionKeys(b *testing.B) {
	const n = 1_000_000
	for _, p := range benchPolicies[:4] {
		b.Run(p.Name, func(b *testing.B) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = "203.0.113." + strconv.Itoa(i)
			}
			ctx := context.Background()
			pp := &p
			now := time.Unix(1_700_000_000, 0)
			b.ReportAllocs()
			b.ResetTimer()
			var perKey float64
			for r := 0; r < b.N; r++ {
				b.StopTimer()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s := mustNew()
				b.StartTimer()
				for _, k := range keys {
					s.Take(ctx, k, pp, now, 1)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				perKey = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(s)
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// BenchmarkBaselineMutexMap is the floor every in-memory limiter is measured
// against in the same run: a counter in a map[string]int64 behind one mutex
// (no algorithm, no bound, no decision).
func BenchmarkBaselineMutexMap(b *testing.B) {
	var mu sync.Mutex
	m := map[string]int64{}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			mu.Lock()
			m["user:42"]++
			mu.Unlock()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var id atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			key := "user:" + strconv.FormatInt(id.Add(1), 10)
			for pb.Next() {
				mu.Lock()
				m[key]++
				mu.Unlock()
			}
		})
	})
}

// BenchmarkFloodAtCap decides once for each of a stream of new keys at a
// full table, each one evicting a key: the cost of a flood of distinct
// keys. Each policy's table holds 65,536 keys (the sliding log's fewer,
// from a 64 MiB budget). In gcra_all_limited every key is limited after its
// one request, so eviction looks at every candidate.
func BenchmarkFloodAtCap(b *testing.B) {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "203.0.113." + strconv.Itoa(i)
	}
	for _, p := range []core.Policy{
		{Name: "gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(10)}},
		{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10)}},
		{Name: "sliding_counter", Algorithm: core.SlidingWindowCounter, Buckets: 6, Limits: []core.Limit{core.PerMinute(10)}},
		{Name: "sliding_log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(1000)}},
		// every key is limited after one request: the worst case of eviction
		{Name: "gcra_all_limited", Algorithm: core.GCRA, Limits: []core.Limit{core.PerHour(1)}},
	} {
		b.Run(p.Name, func(b *testing.B) {
			opt := WithMaxKeys(1 << 16)
			if p.Algorithm == core.SlidingWindowLog {
				opt = WithMaxStateBytes(64 << 20)
			}
			s := mustNew(opt)
			defer s.Close()
			ctx := context.Background()
			pp := &p
			now := time.Unix(1_700_000_000, 0)
			for i := 0; i < 1<<17; i++ {
				s.Take(ctx, keys[i], pp, now, 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Take(ctx, keys[(i+1<<17)&(len(keys)-1)], pp, now, 1)
			}
		})
	}
}

// BenchmarkWorstCase runs each conformkit.WorstCases pattern on one key: the work of
// one decision at the largest configurations validation accepts (a
// 100,000-entry sliding log, a 3,600-bucket sliding counter), next to a
// single-limit GCRA in the same run.
func BenchmarkWorstCase(b *testing.B) {
	for _, wc := range conformkit.WorstCases() {
		b.Run(wc.Name, func(b *testing.B) {
			s := mustNew()
			defer s.Close()
			ctx := context.Background()
			p := wc.Policy
			t0 := time.Unix(1_700_000_000, 0)
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
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				at, cost, allowed := wc.Step(i)
				if d := take(at, cost); d.Allowed != allowed {
					b.Fatalf("step %d: allowed %v", i, d.Allowed)
				}
			}
		})
	}
}
