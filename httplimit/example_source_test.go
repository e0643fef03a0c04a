package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// Limits kept in the application's own data (a map standing in for a
// table of customers), changed at runtime: Invalidate applies the change
// at once, and without it the cache's TTL does.
func ExampleWithLimitSource() {
	store := memstore.MustNew()
	defer store.Close()
	var mu sync.Mutex
	perMinute := map[string]int64{"acme": 3} // the customers table
	source := func(_ context.Context, customer string) ([]core.Limit, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		n, ok := perMinute[customer]
		if !ok {
			return nil, false, nil // not a customer of its own: the rule's limits
		}
		return []core.Limit{core.PerMinute(n)}, true, nil
	}
	def := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}})
	customers, err := core.NewSourced(def, source, core.SourceConfig{TTL: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	customer, _ := keyfuncs.Header("X-Customer") // in production: a verified claim or API key
	h := nethttp.New(def, httplimit.WithKey(customer), httplimit.WithLimitSource(customers))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	quota := func(who string) (n int) {
		for n < 100 {
			r := httptest.NewRequest("GET", "/v1/items", nil)
			r.Header.Set("X-Customer", who)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				return n
			}
			n++
		}
		return n
	}
	fmt.Println(quota("acme"), quota("globex"))

	mu.Lock()
	perMinute["acme"] = 10 // an admin raises acme's limit
	mu.Unlock()
	customers.Invalidate("acme")
	fmt.Println(quota("acme")) // the 3 used this minute carry over: 7 more
	// Output:
	// 3 2
	// 7
}
