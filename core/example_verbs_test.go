package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

func exampleLimiter(limit core.Limit) (*core.Limiter, *core.ManualClock, func()) {
	store := memstore.MustNew()
	clock := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := core.MustNewLimiter(store, core.Policy{Name: "tokens", Limits: []core.Limit{limit}}, core.WithClock(clock))
	return l, clock, func() { store.Close() }
}

// A peek reports what a request would get, consuming nothing.
func ExampleLimiter_PeekN() {
	l, _, done := exampleLimiter(core.PerMinute(2))
	defer done()
	ctx := context.Background()
	l.Allow(ctx, "alice")
	l.Allow(ctx, "alice")
	d, _ := l.PeekN(ctx, "alice", 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	d, _ = l.PeekN(ctx, "alice", 1) // still the same: the peek took nothing
	fmt.Println(d.Allowed, d.RetryAfter)
	// Output:
	// false 30s
	// false 30s
}

// Tokens known only once the response is done are charged past the
// limit; the key then owes them.
func ExampleLimiter_Charge() {
	l, clock, done := exampleLimiter(core.PerMinute(1000))
	defer done()
	ctx := context.Background()
	d, _ := l.Charge(ctx, "key-1", 1600)
	fmt.Println(d.Allowed, d.RetryAfter) // 600 owed and one more token, at 60 ms each
	clock.Advance(d.RetryAfter)
	d, _ = l.Allow(ctx, "key-1")
	fmt.Println(d.Allowed)
	// Output:
	// false 36.06s
	// true
}

// A refund gives units back, never beyond a fresh key's quota.
func ExampleLimiter_Refund() {
	l, _, done := exampleLimiter(core.PerMinute(10))
	defer done()
	ctx := context.Background()
	l.AllowN(ctx, "bob", 4)
	d, _ := l.Refund(ctx, "bob", 100)
	fmt.Println(d.Remaining)
	// Output:
	// 10
}

// Reset forgets a key: support unblocking a user.
func ExampleLimiter_Reset() {
	l, _, done := exampleLimiter(core.PerMinute(3))
	defer done()
	ctx := context.Background()
	l.AllowN(ctx, "carol", 3)
	l.Reset(ctx, "carol")
	d, _ := l.PeekN(ctx, "carol", 1)
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// true 2
}

// Wait blocks until the request is admitted, or fails at once when the
// wait would outlast the context's deadline.
func ExampleLimiter_Wait() {
	l, _, done := exampleLimiter(core.PerSecond(1000))
	defer done()
	ctx := context.Background()
	fmt.Println(l.Wait(ctx, "worker"))
	fmt.Println(l.WaitN(ctx, "worker", 2000))
	// Output:
	// <nil>
	// limitkit: the cost exceeds the limit's capacity; no wait would admit it
}
