package core_test

import (
	"context"
	"fmt"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// At most 2 exports per tenant run at once: a third is denied until one
// of them releases its slot.
func ExampleNewConcurrency() {
	store := memstore.MustNew()
	defer store.Close()
	exports, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "exports", Max: 2})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	first, d, _ := exports.Acquire(ctx, "tenant-a")
	fmt.Println("first:", d.Allowed, "remaining", d.Remaining)
	second, d, _ := exports.Acquire(ctx, "tenant-a")
	fmt.Println("second:", d.Allowed, "remaining", d.Remaining)
	_, d, _ = exports.Acquire(ctx, "tenant-a")
	fmt.Println("third:", d.Allowed, "retry after", d.RetryAfter)
	first.Release() // the first export is done
	third, d, _ := exports.Acquire(ctx, "tenant-a")
	fmt.Println("third again:", d.Allowed)
	second.Release()
	third.Release()
	// Output:
	// first: true remaining 1
	// second: true remaining 0
	// third: false retry after 1s
	// third again: true
}

// A Slot is a value: hand it to the goroutine that does the work. Release
// frees it once, whichever copy calls it first; later calls do nothing.
func ExampleSlot_Release() {
	store := memstore.MustNew()
	defer store.Close()
	exports, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "exports", Max: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	slot, _, _ := exports.Acquire(ctx, "tenant-a")
	done := make(chan struct{})
	go func(s core.Slot) {
		defer close(done)
		defer s.Release() // the export runs here
	}(slot)
	<-done
	next, d, _ := exports.Acquire(ctx, "tenant-a")
	fmt.Println("next export:", d.Allowed)
	slot.Release() // a second release of the first slot frees nothing
	_, d, _ = exports.Acquire(ctx, "tenant-a")
	fmt.Println("one more while next runs:", d.Allowed)
	next.Release()
	// Output:
	// next export: true
	// one more while next runs: false
}
