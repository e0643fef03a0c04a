package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// A policy with a primary and a secondary threshold: 900 per 15 minutes and
// 200 per minute, both enforced; a denial consumes from neither.
func ExampleNewLimiter() {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := core.NewLimiter(store, core.Policy{
		Name:      "api2-post",
		Algorithm: core.SlidingWindowLog,
		Limits:    []core.Limit{core.Per(900, 15*time.Minute), core.PerMinute(200)},
	}, core.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		l.Allow(ctx, "user:alice")
	}
	d, _ := l.Allow(ctx, "user:alice")
	fmt.Println(d.Allowed, d.Limit, d.RetryAfter)
	clock.Advance(time.Minute)
	d, _ = l.Allow(ctx, "user:alice")
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// false 200 per 1m 1m0s
	// true 199
}

func ExamplePolicy_Validate() {
	p := core.Policy{Name: "login", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10).WithBurst(20)}}
	fmt.Println(p.Validate())
	// Output:
	// core: policy "login": limits[0]: burst applies to token bucket and GCRA only; fixed_window ignores it, remove it
}

// Elastic throttling: a limit of 10 a minute that may go to 20 while the
// service has room (here, at most 100 requests in flight).
func ExampleElastic() {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var inflight core.InFlight // the middleware's counter
	l, err := core.NewLimiter(store, core.Policy{
		Name:      "search",
		Algorithm: core.FixedWindow,
		Limits:    []core.Limit{core.PerMinute(10)},
		Elastic:   &core.Elastic{CeilingPercent: 200, Signal: core.LoadBelow{InFlight: &inflight, Max: 100}},
	}, core.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	count := func() (nominal, elastic, denied int) {
		for i := 0; i < 25; i++ {
			d, _ := l.Allow(ctx, "user:alice")
			switch {
			case d.Elastic:
				elastic++
			case d.Allowed:
				nominal++
			default:
				denied++
			}
		}
		return
	}
	fmt.Println(count())
	clock.Advance(time.Minute)
	for i := 0; i < 150; i++ {
		inflight.Enter() // the service is loaded
	}
	fmt.Println(count())
	// Output:
	// 10 10 5
	// 10 0 15
}
