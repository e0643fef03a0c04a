package fleet_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
)

// remote stands in for the Redis store (redisstore.New(client)) in this
// example: an embedded store that says it does I/O, counting its calls.
type remote struct {
	memstore.Store
	calls atomic.Int64
}

func (r *remote) Local() bool { return false }

func (r *remote) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	r.calls.Add(1)
	return r.Store.Take(ctx, key, p, now, cost)
}

// A client over its limit keeps hammering: the deny cache answers without
// a round trip until the denial's RetryAfter has passed.
func ExampleNew() {
	rs := &remote{Store: memstore.MustNew()}
	defer rs.Close()
	var hits atomic.Int64
	tier, err := fleet.New(rs, fleet.WithObserver(core.ObserverFunc(func(e core.Event) {
		if e.Kind == core.EventDenyCacheHit {
			hits.Add(1)
		}
	})))
	if err != nil {
		panic(err)
	}
	defer tier.Close()
	clk := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := core.MustNewLimiter(tier, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(3)}}, core.WithClock(clk))
	for i := 0; i < 100; i++ {
		_, _ = lim.Allow(context.Background(), "alice")
	}
	fmt.Println("remote calls:", rs.calls.Load(), "cached denials:", hits.Load())
	clk.Advance(20 * time.Second) // one unit back
	d, _ := lim.Allow(context.Background(), "alice")
	fmt.Println("after 20s allowed:", d.Allowed, "remote calls:", rs.calls.Load())
	// Output:
	// remote calls: 4 cached denials: 96
	// after 20s allowed: true remote calls: 5
}
