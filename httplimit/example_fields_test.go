package httplimit_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// An adapter whose framework has no http.Header (gRPC metadata, fasthttp)
// writes the fields one by one; the Field constants name them.
func ExampleEngine_Fields() {
	store := memstore.MustNew()
	defer store.Close()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Algorithm: core.FixedWindow,
		Limits: []core.Limit{core.PerMinute(5)}}, core.WithClock(clk))
	e, err := httplimit.NewAdapterEngine(httplimit.Adapter{Name: "myadapter"}, l, httplimit.WithResetDelta())
	if err != nil {
		panic(err)
	}
	var res httplimit.Result
	req := httptest.NewRequest("GET", "/", nil)
	e.Decide(context.Background(), view{keyfuncs.FromHTTP(req)}, nil, &res)

	var f httplimit.Fields
	e.Fields(&res, &f)
	for i := 0; i < f.Len(); i++ {
		name, dyn, static := f.At(i)
		if dyn != nil {
			static = string(dyn) // dyn aliases f: copy it
		}
		fmt.Printf("%s: %s\n", strings.ToLower(name), static)
		if name == "X-Ratelimit-Remaining" {
			fmt.Println("remaining", static)
		}
	}
	// Output:
	// x-ratelimit-limit: 5
	// x-ratelimit-remaining: 4
	// remaining 4
	// x-ratelimit-reset: 40
}
