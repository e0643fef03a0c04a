package rls_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rls"
)

// Example serves an envoyproxy/ratelimit configuration from the embedded
// store; register srv on a grpc.Server with pb.RegisterRateLimitServiceServer.
func Example() {
	cfg, err := rls.ParseConfig(map[string][]byte{"edge.yaml": []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: year
      requests_per_unit: 2
`)})
	if err != nil {
		panic(err)
	}
	store := memstore.MustNew()
	defer store.Close()
	srv, err := rls.New(store, cfg, rls.WithHeaders(false))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlpb.RateLimitDescriptor{{
		Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}},
	}}}
	for range 3 {
		resp, err := srv.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		fmt.Println(resp.OverallCode, resp.Statuses[0].LimitRemaining)
	}
	// Output:
	// OK 1
	// OK 0
	// OVER_LIMIT 0
}

// ExampleConfig_Match shares one quota between Envoy (through the Server)
// and a Go service's middleware: the middleware's limiter has the rule's
// policy, its scope is "" and its key function returns Match's key.
func ExampleConfig_Match() {
	cfg, err := rls.ParseConfig(map[string][]byte{"edge.yaml": []byte(`
domain: edge
descriptors:
  - key: api_key
    rate_limit: {unit: year, requests_per_unit: 5}
`)})
	if err != nil {
		panic(err)
	}
	store := memstore.MustNew() // or two stores on one Redis, in two processes
	defer store.Close()
	srv, err := rls.New(store, cfg, rls.WithHeaders(false))
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	policy, key, _ := cfg.Match("edge", "api_key", "abc")
	fmt.Println(policy.Name, key)
	lim, err := core.NewLimiter(store, policy)
	if err != nil {
		panic(err)
	}
	defer lim.Release()
	byAPIKey := func(r keyfuncs.Request) (string, error) {
		_, key, ok := cfg.Match("edge", "api_key", r.Header("X-Api-Key"))
		if !ok {
			return "", keyfuncs.ErrNoKey
		}
		return key, nil
	}
	api := nethttp.New(lim, httplimit.WithScope(""), httplimit.WithKey(byAPIKey))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	for range 3 { // three requests to the Go service
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Api-Key", "abc")
		api.ServeHTTP(httptest.NewRecorder(), r)
	}
	// Envoy asks for the same client: two of five are left
	resp, err := srv.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "edge",
		Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "api_key", Value: "abc"}}}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.OverallCode, resp.Statuses[0].LimitRemaining)
	// Output:
	// rls:edge.api_key 7:api_key3:abc
	// OK 1
}
