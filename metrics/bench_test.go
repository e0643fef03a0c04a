package metrics_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/metrics"
)

// BenchmarkDecision measures a Limiter over the embedded store without an
// observer ("none"), with one that does nothing ("noop": what core's event
// costs) and with a Metrics ("metrics"), serial and under RunParallel; the
// difference is what the metrics cost per decision. The
// keys cycle over 1024 so that the store's work is the same in both.
func BenchmarkDecision(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "client-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	for _, mode := range []string{"none", "noop", "metrics"} {
		newLimiter := func(b *testing.B) *core.Limiter {
			st, err := memstore.New()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			var opts []core.Option
			switch mode {
			case "noop":
				opts = append(opts, core.WithObserver(core.ObserverFunc(func(core.Event) {})))
			case "metrics":
				opts = append(opts, core.WithObserver(metrics.MustNew()))
			}
			return core.MustNewLimiter(st, core.Policy{Name: "api1-get", Limits: []core.Limit{core.PerSecond(100_000)}}, opts...)
		}
		b.Run("serial/"+mode, func(b *testing.B) {
			l := newLimiter(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Allow(ctx, keys[i&1023]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("parallel/"+mode, func(b *testing.B) {
			l := newLimiter(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := l.Allow(ctx, keys[i&1023]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkObserve is the observer alone: one decision event of a known
// policy.
func BenchmarkObserve(b *testing.B) {
	m := metrics.MustNew()
	e := core.Event{Kind: core.EventDecision, Policy: "api1-get", Decision: core.Decision{Allowed: true, Policy: "api1-get"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Observe(e)
	}
}

// BenchmarkObserverOverhead is BenchmarkDecision/serial interleaved:
// blocks of 512 decisions rotate between a limiter without an observer,
// one with a no-op observer and one with a Metrics, so that load from
// other processes falls on all alike. It reports each one's median ns
// per decision over the blocks and what the Metrics add ("added-ns").
func BenchmarkObserverOverhead(b *testing.B) {
	mk := func(obs core.Observer) *core.Limiter {
		st, err := memstore.New()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		var opts []core.Option
		if obs != nil {
			opts = append(opts, core.WithObserver(obs))
		}
		return core.MustNewLimiter(st, core.Policy{Name: "api1-get", Limits: []core.Limit{core.PerSecond(100_000)}}, opts...)
	}
	lims := [3]*core.Limiter{mk(nil), mk(core.ObserverFunc(func(core.Event) {})), mk(metrics.MustNew())}
	keys := make([]string, 512)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	ctx := context.Background()
	// Per-decision time of each block, per limiter: the medians are
	// robust to the preemptions a shared machine inflicts on some blocks.
	var blocks [3][]float64
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		for w := range 3 {
			block := min(len(keys), b.N-done)
			if block <= 0 {
				break
			}
			l := lims[w]
			start := time.Now()
			for i := 0; i < block; i++ {
				if _, err := l.Allow(ctx, keys[i]); err != nil {
					b.Fatal(err)
				}
			}
			blocks[w] = append(blocks[w], float64(time.Since(start).Nanoseconds())/float64(block))
			done += block
		}
	}
	b.StopTimer()
	if len(blocks[2]) > 0 {
		med := func(i int) float64 {
			slices.Sort(blocks[i])
			return blocks[i][len(blocks[i])/2]
		}
		none, noop, with := med(0), med(1), med(2)
		b.ReportMetric(none, "none-ns")
		b.ReportMetric(noop, "noop-ns")
		b.ReportMetric(with, "metrics-ns")
		b.ReportMetric(with-none, "added-ns")
	}
}
