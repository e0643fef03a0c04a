package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// TestLimitSource: a tenant's own limits from the application's data
// decide its calls through httplimit.WithLimitSource, as in the HTTP
// adapters; a tenant the source does not know gets the interceptor's
// limiter.
func TestLimitSource(t *testing.T) {
	clock := core.NewManualClock(t0)
	def := newLimiter(t, 3, clock)
	src, err := core.NewSourced(def, func(_ context.Context, id string) ([]core.Limit, bool, error) {
		if id == "acme" {
			return []core.Limit{core.PerMinute(5)}, true, nil
		}
		return nil, false, nil
	}, core.SourceConfig{Timeout: time.Hour}) // no lookup times out on a loaded host
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := keyfuncs.Header("X-Tenant")
	if err != nil {
		t.Fatal(err)
	}
	ic := grpclimit.MustNew(def, httplimit.WithKey(tenant), httplimit.WithLimitSource(src))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	for tenant, limit := range map[string]int{"acme": 5, "globex": 3} {
		for i := 1; i <= limit+1; i++ {
			r := call(t, cc, sayMethod, "x-tenant", tenant)
			want := codes.OK
			if i > limit {
				want = codes.ResourceExhausted
			}
			if r.code != want {
				t.Fatalf("tenant %s call %d: %v, want %v", tenant, i, r.st, want)
			}
		}
	}
}
