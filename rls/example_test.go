package rls_test

import (
	"context"
	"fmt"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limitkit/limitkit/core/memstore"
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
