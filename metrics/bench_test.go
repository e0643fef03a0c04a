package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/metrics"
)

// BenchmarkDecision measures a Limiter over the embedded store without an
// observer ("none") and with a Metrics ("metrics"), serial and under
// RunParallel; the difference is what the metrics cost per decision. The
// keys cycle over 1024 so that the store's work is the same in both.
func BenchmarkDecision(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "client-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	for _, mode := range []string{"none", "metrics"} {
		newLimiter := func(b *testing.B) *core.Limiter {
			st, err := memstore.New()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			var opts []core.Option
			if mode == "metrics" {
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
	e := core.Event{Kind: core.EventDecision, Policy: "api1-get", Outcome: core.OutcomeAllowed, Decision: core.Decision{Allowed: true, Policy: "api1-get"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Observe(e)
	}
}

// BenchmarkObserverOverhead is BenchmarkDecision/serial paired: blocks of
// 512 decisions alternate between a limiter without an observer and one
// with a Metrics, so that load from other processes falls on both alike.
// It reports each one's ns per decision and the difference ("added-ns").
func BenchmarkObserverOverhead(b *testing.B) {
	mk := func(obs bool) *core.Limiter {
		st, err := memstore.New()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		var opts []core.Option
		if obs {
			opts = append(opts, core.WithObserver(metrics.MustNew()))
		}
		return core.MustNewLimiter(st, core.Policy{Name: "api1-get", Limits: []core.Limit{core.PerSecond(100_000)}}, opts...)
	}
	lims := [2]*core.Limiter{mk(false), mk(true)}
	keys := make([]string, 512)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	ctx := context.Background()
	var spent [2]time.Duration
	var n [2]int
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		for w := range 2 {
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
			spent[w] += time.Since(start)
			n[w] += block
			done += block
		}
	}
	if n[0] > 0 && n[1] > 0 {
		none := float64(spent[0].Nanoseconds()) / float64(n[0])
		with := float64(spent[1].Nanoseconds()) / float64(n[1])
		b.ReportMetric(none, "none-ns")
		b.ReportMetric(with, "metrics-ns")
		b.ReportMetric(with-none, "added-ns")
	}
}
