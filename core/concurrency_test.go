package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newConc(t *testing.T, store core.Store, clk core.Clock, p core.ConcurrencyPolicy) *core.Concurrency {
	t.Helper()
	c, err := core.NewConcurrency(store, p, core.WithClock(clk))
	require.NoError(t, err)
	return c
}

// TestConcurrencyExact: many goroutines over several Concurrency values of
// one name on one store, all asking at once while nobody releases, get
// exactly Max slots; after they release, exactly Max again.
func TestConcurrencyExact(t *testing.T) {
	store := mustMem()
	defer store.Close()
	clk := core.NewManualClock(t0)
	p := core.ConcurrencyPolicy{Name: "exports", Max: 3}
	cs := []*core.Concurrency{newConc(t, store, clk, p), newConc(t, store, clk, p), newConc(t, store, clk, p)}
	for round := 0; round < 2; round++ {
		var admitted atomic.Int64
		var mu sync.Mutex
		var releases []core.Slot
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 60; g++ {
			wg.Add(1)
			go func(c *core.Concurrency) {
				defer wg.Done()
				<-start
				rel, d, err := c.Acquire(context.Background(), "user-1")
				assert.NoError(t, err)
				if d.Allowed {
					admitted.Add(1)
					mu.Lock()
					releases = append(releases, rel)
					mu.Unlock()
				} else {
					rel.Release() // a no-op: nothing held
					assert.Zero(t, d.Remaining)
					assert.Equal(t, int64(3), d.Limit.Requests)
				}
			}(cs[g%len(cs)])
		}
		close(start)
		wg.Wait()
		require.Equal(t, int64(3), admitted.Load(), "round %d", round)
		for _, r := range releases {
			r.Release()
		}
	}
}

// TestConcurrencyNeverAboveMax hammers one key; the handler tracks how
// many run at once, which never passes Max, and every slot is back at the
// end.
func TestConcurrencyNeverAboveMax(t *testing.T) {
	store := mustMem()
	defer store.Close()
	p := core.ConcurrencyPolicy{Name: "hammer", Max: 4}
	cs := []*core.Concurrency{newConc(t, store, core.SystemClock{}, p), newConc(t, store, core.SystemClock{}, p)}
	var running, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(c *core.Concurrency) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				rel, d, err := c.Acquire(context.Background(), "k")
				assert.NoError(t, err)
				if !d.Allowed {
					continue
				}
				admitted.Add(1)
				n := running.Add(1)
				for {
					m := peak.Load()
					if n <= m || peak.CompareAndSwap(m, n) {
						break
					}
				}
				running.Add(-1)
				rel.Release()
			}
		}(cs[g%2])
	}
	wg.Wait()
	assert.LessOrEqual(t, peak.Load(), int64(4))
	assert.Positive(t, admitted.Load())
	for i := 0; i < 4; i++ {
		_, d, err := cs[0].Acquire(context.Background(), "k")
		require.NoError(t, err)
		require.True(t, d.Allowed, "slot %d leaked", i)
	}
	_, d, _ := cs[0].Acquire(context.Background(), "k")
	assert.False(t, d.Allowed)
}

// leasedSlots is a store that holds only leased slots (as a remote store
// does): memstore's AcquireSlot and ReleaseSlot, without its counted slots.
type leasedSlots struct{ storekit.SlotStore }

// TestConcurrencyLeaseFreesCrashedHolder: on a store of leased slots,
// slots never released come back once their lease has passed, not
// before.
func TestConcurrencyLeaseFreesCrashedHolder(t *testing.T) {
	ms := mustMem()
	defer ms.Close()
	store := leasedSlots{ms}
	clk := core.NewManualClock(t0)
	c := newConc(t, store, clk, core.ConcurrencyPolicy{Name: "crash", Max: 2, Lease: 10 * time.Second})
	for i := 0; i < 2; i++ {
		_, d, _ := c.Acquire(context.Background(), "k")
		require.True(t, d.Allowed)
	}
	_, d, _ := c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed)
	clk.Advance(10*time.Second - time.Microsecond)
	_, d, _ = c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed, "freed before the lease ended")
	clk.Advance(time.Microsecond)
	_, d, _ = c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed, "a crashed holder's slot did not come back after its lease")
	assert.Equal(t, int64(1), d.Remaining)
}

// TestConcurrencyRenewKeepsLongHolder: on a store of leased slots, a
// holder that runs past its lease keeps its slot while it is renewed; the
// renewal timer is disarmed once nothing is held (no leak).
func TestConcurrencyRenewKeepsLongHolder(t *testing.T) {
	ms := mustMem()
	defer ms.Close()
	store := leasedSlots{ms}
	clk := core.NewManualClock(t0)
	c := newConc(t, store, clk, core.ConcurrencyPolicy{Name: "long", Max: 1, Lease: 3 * time.Second})
	rel, d, _ := c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	assert.True(t, c.RenewArmed())
	for i := 0; i < 10; i++ {
		clk.Advance(time.Second)
		require.True(t, c.RenewNow())
	}
	_, d, _ = c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed, "a renewed holder lost its slot after 10 s on a 3 s lease")
	rel.Release()
	assert.True(t, c.RenewArmed(), "the armed timer runs once more")
	assert.False(t, c.RenewNow())
	assert.False(t, c.RenewArmed(), "the renewal timer stays armed with nothing held")
	rel2, d, _ := c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	rel2.Release()
}

// TestConcurrencyReleaseIdempotent: a second release frees nothing more.
func TestConcurrencyReleaseIdempotent(t *testing.T) {
	store := mustMem()
	defer store.Close()
	c := newConc(t, store, core.NewManualClock(t0), core.ConcurrencyPolicy{Name: "idem", Max: 2})
	a, _, _ := c.Acquire(context.Background(), "k")
	_, d, _ := c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	assert.Zero(t, d.Remaining)
	a.Release()
	a.Release()
	_, d, _ = c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	_, d, _ = c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed, "a second release freed another holder's slot")
}

// TestConcurrencyRetryAfter: 1 s before any release, then the mean hold
// time rounded up to a second, capped by the lease.
func TestConcurrencyRetryAfter(t *testing.T) {
	store := mustMem()
	defer store.Close()
	clk := core.NewManualClock(t0)
	c := newConc(t, store, clk, core.ConcurrencyPolicy{Name: "retry", Max: 1, Lease: 20 * time.Second})
	rel, _, _ := c.Acquire(context.Background(), "k")
	_, d, _ := c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed)
	assert.Equal(t, time.Second, d.RetryAfter)
	assert.Equal(t, time.Second, d.ResetAfter)
	clk.Advance(4500 * time.Millisecond)
	rel.Release()
	rel, _, _ = c.Acquire(context.Background(), "k")
	_, d, _ = c.Acquire(context.Background(), "k")
	assert.Equal(t, 5*time.Second, d.RetryAfter, "mean hold 4.5 s rounds up to 5 s")
	clk.Advance(1004500 * time.Millisecond) // mean += (1004.5-4.5)/8 = 129.5 s
	rel.Release()
	_, _, _ = c.Acquire(context.Background(), "k")
	_, d, _ = c.Acquire(context.Background(), "k")
	assert.Equal(t, 20*time.Second, d.RetryAfter, "capped by the lease")
}

// failSlots is a SlotStore whose every call fails.
type failSlots struct{ core.Store }

func (failSlots) AcquireSlot(context.Context, string, *core.ConcurrencyPolicy, uint64, time.Time) (int64, bool, error) {
	return 0, false, errors.New("down")
}
func (failSlots) ReleaseSlot(context.Context, string, *core.ConcurrencyPolicy, uint64) error {
	return errors.New("down")
}

// TestConcurrencyFailMode: a store error follows the fail mode.
func TestConcurrencyFailMode(t *testing.T) {
	st := failSlots{mustMem()}
	open := newConc(t, st, core.NewManualClock(t0), core.ConcurrencyPolicy{Name: "o", Max: 1})
	rel, d, err := open.Acquire(context.Background(), "k")
	var se *core.StoreError
	require.ErrorAs(t, err, &se)
	assert.True(t, d.Allowed)
	assert.True(t, d.Degraded)
	rel.Release()
	closed := newConc(t, st, core.NewManualClock(t0), core.ConcurrencyPolicy{Name: "c", Max: 1, FailMode: core.FailClosed})
	_, d, err = closed.Acquire(context.Background(), "k")
	require.ErrorAs(t, err, &se)
	assert.False(t, d.Allowed)
	assert.True(t, d.Degraded)
	assert.Equal(t, time.Second, d.RetryAfter)
}

// TestNewConcurrencyErrors: bad configuration fails at construction.
func TestNewConcurrencyErrors(t *testing.T) {
	ms := mustMem()
	for _, tc := range []struct {
		store core.Store
		p     core.ConcurrencyPolicy
		want  string
	}{
		{nil, core.ConcurrencyPolicy{Name: "a", Max: 1}, "nil store"},
		{struct{ core.Store }{ms}, core.ConcurrencyPolicy{Name: "a", Max: 1}, "storekit.SlotStore"},
		{ms, core.ConcurrencyPolicy{Name: "a"}, "max 0 must be >= 1"},
		{ms, core.ConcurrencyPolicy{Name: "a", Max: 1, Lease: time.Millisecond}, "lease 1ms"},
		{ms, core.ConcurrencyPolicy{Name: "a", Max: 1, Lease: 25 * time.Hour}, "lease 25h"},
		{ms, core.ConcurrencyPolicy{Name: "a", Max: 1, FailMode: core.FailLocal}, "not supported"},
		{ms, core.ConcurrencyPolicy{Name: "", Max: 1}, "name"},
	} {
		_, err := core.NewConcurrency(tc.store, tc.p)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	c, err := core.NewConcurrency(ms, core.ConcurrencyPolicy{Name: "a", Max: 1})
	require.NoError(t, err)
	assert.Equal(t, core.DefaultLease, c.Policy().Lease)
}

// countObserver sums EventInFlight changes by policy.
type countObserver struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *countObserver) Observe(e core.Event) {
	if e.Kind != core.EventInFlight {
		return
	}
	o.mu.Lock()
	o.n[e.Policy] += e.Keys
	o.mu.Unlock()
}

// TestConcurrencyObserverInFlight: the observer sees each slot taken and
// given back, so that its sum is the slots held; a denial reports none.
func TestConcurrencyObserverInFlight(t *testing.T) {
	store := mustMem()
	defer store.Close()
	o := &countObserver{n: map[string]int{}}
	c, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "obs", Max: 2}, core.WithObserver(o))
	require.NoError(t, err)
	a, _, _ := c.Acquire(context.Background(), "k")
	b, _, _ := c.Acquire(context.Background(), "k")
	_, d, _ := c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed)
	assert.Equal(t, 2, o.n["obs"])
	a.Release()
	a.Release()
	assert.Equal(t, 1, o.n["obs"])
	b.Release()
	assert.Equal(t, 0, o.n["obs"])
	assert.Equal(t, "in_flight", core.EventInFlight.String())
}

// TestConcurrencySlotReleaseOnce: a Slot's Release frees its slot once,
// whichever of its copies calls it and however many goroutines do, also
// after its handle went to the next holder.
func TestConcurrencySlotReleaseOnce(t *testing.T) {
	store := mustMem()
	defer store.Close()
	o := &countObserver{n: map[string]int{}}
	c, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "once", Max: 1}, core.WithObserver(o), core.WithClock(core.NewManualClock(t0)))
	require.NoError(t, err)
	ctx := context.Background()
	a, d, _ := c.Acquire(ctx, "k")
	require.True(t, d.Allowed)
	copyOfA := a
	a.Release()
	for i := 0; i < 3; i++ {
		b, d, _ := c.Acquire(ctx, "k") // may reuse a's handle
		require.True(t, d.Allowed, "round %d", i)
		a.Release()
		copyOfA.Release()
		_, d, _ = c.Acquire(ctx, "k")
		require.False(t, d.Allowed, "round %d: a stale Slot released the next holder's slot", i)
		b.Release()
	}
	// many goroutines release copies of one Slot at once: one release
	s, d, _ := c.Acquire(ctx, "k")
	require.True(t, d.Allowed)
	other, _, _ := c.Acquire(ctx, "j")
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(s core.Slot) {
			defer wg.Done()
			s.Release()
		}(s)
	}
	wg.Wait()
	assert.Equal(t, 1, o.n["once"], "the observer saw the slot given back more than once")
	_, d, _ = c.Acquire(ctx, "j")
	require.False(t, d.Allowed, "releases of k's slot freed j's")
	other.Release()
	core.Slot{}.Release() // the zero Slot holds nothing
	assert.Equal(t, 0, o.n["once"])
}

// TestConcurrencyEmbeddedHasNoLease: on the embedded store a slot is held
// until it is released, however long that takes, and no renewal timer
// runs.
func TestConcurrencyEmbeddedHasNoLease(t *testing.T) {
	store := mustMem()
	defer store.Close()
	clk := core.NewManualClock(t0)
	c := newConc(t, store, clk, core.ConcurrencyPolicy{Name: "nolease", Max: 1, Lease: time.Second})
	s, d, _ := c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	assert.Equal(t, core.Limit{Requests: 1, Window: time.Second}, d.Limit)
	assert.False(t, c.RenewArmed(), "a renewal timer for an embedded slot")
	clk.Advance(time.Hour)
	_, d, _ = c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed, "an embedded slot expired while held")
	assert.Equal(t, time.Second, d.RetryAfter)
	s.Release()
	_, d, _ = c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	assert.False(t, c.RenewArmed())
}

// TestConcurrencyNoLeakOnDenialOrPanic: denials take nothing, and a
// holder that panics gives its slot back through its deferred Release:
// afterwards exactly Max slots are free again.
func TestConcurrencyNoLeakOnDenialOrPanic(t *testing.T) {
	store := mustMem()
	defer store.Close()
	c := newConc(t, store, core.NewManualClock(t0), core.ConcurrencyPolicy{Name: "leak", Max: 3})
	ctx := context.Background()
	var held []core.Slot
	for i := 0; i < 3; i++ {
		s, d, _ := c.Acquire(ctx, "k")
		require.True(t, d.Allowed)
		held = append(held, s)
	}
	for i := 0; i < 100; i++ {
		s, d, _ := c.Acquire(ctx, "k")
		require.False(t, d.Allowed)
		s.Release() // the zero Slot: nothing
	}
	for _, s := range held {
		s.Release()
	}
	work := func() {
		s, d, _ := c.Acquire(ctx, "k")
		require.True(t, d.Allowed)
		defer s.Release()
		panic("handler failed")
	}
	for i := 0; i < 10; i++ {
		func() {
			defer func() { _ = recover() }()
			work()
		}()
	}
	for i := 0; i < 3; i++ {
		_, d, _ := c.Acquire(ctx, "k")
		require.True(t, d.Allowed, "slot %d leaked", i)
		assert.Equal(t, int64(2-i), d.Remaining)
	}
	_, d, _ := c.Acquire(ctx, "k")
	require.False(t, d.Allowed, "more than Max after denials and panics")
}

// TestConcurrencyRenewStopsOnClosedStore: once the store is closed, the
// renewal disarms its timer instead of calling the store (and logging)
// every Lease/3 for as long as a slot stays held; the slot still
// releases.
func TestConcurrencyRenewStopsOnClosedStore(t *testing.T) {
	ms := mustMem()
	store := leasedSlots{ms}
	clk := core.NewManualClock(t0)
	c := newConc(t, store, clk, core.ConcurrencyPolicy{Name: "closed", Max: 1, Lease: 3 * time.Second})
	rel, d, _ := c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	require.True(t, c.RenewNow(), "renewing a held slot on an open store")
	require.NoError(t, ms.Close())
	clk.Advance(time.Second)
	assert.False(t, c.RenewNow(), "a closed store keeps the renewal timer armed")
	assert.False(t, c.RenewArmed())
	rel.Release()
	rel.Release()
}
