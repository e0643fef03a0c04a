package core_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// Limits per customer from the application's data (a map standing in
// for a table): Select returns the Limiter of the customer's own limits,
// or the default's for a customer the source does not know. Invalidate
// applies a changed limit at once.
func ExampleNewSourced() {
	store := memstore.MustNew()
	defer store.Close()
	var mu sync.Mutex
	perMinute := map[string]int64{"acme": 3}
	source := func(_ context.Context, customer string) ([]core.Limit, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		n, ok := perMinute[customer]
		if !ok {
			return nil, false, nil
		}
		return []core.Limit{core.PerMinute(n)}, true, nil
	}
	def := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}})
	customers, err := core.NewSourced(def, source, core.SourceConfig{TTL: 30 * time.Second, Timeout: time.Second})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	quota := func(customer string) (n int) {
		for n < 100 {
			d, _ := customers.Select(ctx, customer).Allow(ctx, customer)
			if !d.Allowed {
				return n
			}
			n++
		}
		return n
	}
	fmt.Println(quota("acme"), quota("globex"))
	mu.Lock()
	perMinute["acme"] = 5
	mu.Unlock()
	customers.Invalidate("acme")
	fmt.Println(quota("acme"), customers.Select(ctx, "acme").Policy().Limits[0])
	// Output:
	// 3 2
	// 5 5 per 1m
}
