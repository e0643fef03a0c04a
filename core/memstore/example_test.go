package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

func ExampleNew() {
	store, err := memstore.New(memstore.WithMaxKeys(1_000_000))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	clock := core.NewManualClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	login := core.MustNewLimiter(store, core.Policy{
		Name:        "login",
		Algorithm:   core.FixedWindow,
		CountDenied: true, // keep hammering, stay locked out
		Limits:      []core.Limit{core.PerMinute(3)},
	}, core.WithClock(clock))

	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		d, _ := login.Allow(ctx, "ip:203.0.113.7")
		fmt.Printf("attempt %d: allowed=%v remaining=%d retry=%v\n", i, d.Allowed, d.Remaining, d.RetryAfter)
	}
	fmt.Println("keys held:", store.Stats().Keys)
	// Output:
	// attempt 1: allowed=true remaining=2 retry=0s
	// attempt 2: allowed=true remaining=1 retry=0s
	// attempt 3: allowed=true remaining=0 retry=0s
	// attempt 4: allowed=false remaining=0 retry=1m0s
	// keys held: 1
}
