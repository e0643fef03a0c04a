package grpclimit_test

import (
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Per method, 10 calls a minute per API key (metadata x-api-key); calls
// without one are limited by their peer IP.
func ExampleNew() {
	store := memstore.MustNew()
	defer store.Close()
	limiter := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.Per(10, time.Minute)}})
	apiKey, err := keyfuncs.APIKey("x-api-key", "")
	if err != nil {
		panic(err)
	}
	ic, err := grpclimit.New(limiter, httplimit.WithKey(apiKey))
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(ic.UnaryServerInterceptor()),
		grpc.StreamInterceptor(ic.StreamServerInterceptor()),
	)
	defer srv.Stop()
	fmt.Println(grpclimit.Exempt("/grpc.health.v1.Health/Check"))
	// Output: true
}
