package metrics_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/metrics"
)

// Metrics are an observer on each limiter and a collector in a registry
// (promhttp.HandlerFor(reg, ...) serves it).
func Example() {
	m := metrics.MustNew()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	store, _ := memstore.New()
	defer store.Close()
	m.WatchMemstore("default", store)
	lim := core.MustNewLimiter(store, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(2)}}, core.WithObserver(m))
	for range 3 {
		_, _ = lim.Allow(context.Background(), "198.51.100.7")
	}

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var v float64
			if c := s.GetCounter(); c != nil {
				v = c.GetValue()
			} else if g := s.GetGauge(); g != nil {
				v = g.GetValue()
			}
			if v == 0 {
				continue
			}
			fmt.Print(mf.GetName())
			for _, l := range s.GetLabel() {
				fmt.Printf(" %s=%s", l.GetName(), l.GetValue())
			}
			fmt.Println(" ", v)
		}
	}
	// Output:
	// limitkit_decisions_total outcome=allowed policy=login  2
	// limitkit_decisions_total outcome=denied policy=login  1
	// limitkit_memstore_keys store=default  1
}
