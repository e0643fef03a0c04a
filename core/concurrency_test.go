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
	"github.com/limitkit/limitkit/core/memstore"
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
	store := memstore.MustNew()
	defer store.Close()
	clk := core.NewManualClock(t0)
	p := core.ConcurrencyPolicy{Name: "exports", Max: 3}
	cs := []*core.Concurrency{newConc(t, store, clk, p), newConc(t, store, clk, p), newConc(t, store, clk, p)}
	for round := 0; round < 2; round++ {
		var admitted atomic.Int64
		var mu sync.Mutex
		var releases []func()
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
					rel() // a no-op: nothing held
					assert.Zero(t, d.Remaining)
					assert.Equal(t, int64(3), d.Limit.Requests)
				}
			}(cs[g%len(cs)])
		}
		close(start)
		wg.Wait()
		require.Equal(t, int64(3), admitted.Load(), "round %d", round)
		for _, r := range releases {
			r()
		}
	}
}

// TestConcurrencyNeverAboveMax hammers one key; the handler tracks how
// many run at once, which never passes Max, and every slot is back at the
// end.
func TestConcurrencyNeverAboveMax(t *testing.T) {
	store := memstore.MustNew()
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
				rel()
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

// TestConcurrencyLeaseFreesCrashedHolder: slots never released come back
// once their lease has passed, not before.
func TestConcurrencyLeaseFreesCrashedHolder(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
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

// TestConcurrencyRenewKeepsLongHolder: a holder that runs past its lease
// keeps its slot while it is renewed; the renewal timer is disarmed once
// nothing is held (no leak).
func TestConcurrencyRenewKeepsLongHolder(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
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
	rel()
	assert.True(t, c.RenewArmed(), "the armed timer runs once more")
	assert.False(t, c.RenewNow())
	assert.False(t, c.RenewArmed(), "the renewal timer stays armed with nothing held")
	rel2, d, _ := c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	rel2()
}

// TestConcurrencyReleaseIdempotent: a second release frees nothing more.
func TestConcurrencyReleaseIdempotent(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	c := newConc(t, store, core.NewManualClock(t0), core.ConcurrencyPolicy{Name: "idem", Max: 2})
	a, _, _ := c.Acquire(context.Background(), "k")
	_, d, _ := c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	assert.Zero(t, d.Remaining)
	a()
	a()
	_, d, _ = c.Acquire(context.Background(), "k")
	require.True(t, d.Allowed)
	_, d, _ = c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed, "a second release freed another holder's slot")
}

// TestConcurrencyRetryAfter: 1 s before any release, then the mean hold
// time rounded up to a second, capped by the lease.
func TestConcurrencyRetryAfter(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clk := core.NewManualClock(t0)
	c := newConc(t, store, clk, core.ConcurrencyPolicy{Name: "retry", Max: 1, Lease: 20 * time.Second})
	rel, _, _ := c.Acquire(context.Background(), "k")
	_, d, _ := c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed)
	assert.Equal(t, time.Second, d.RetryAfter)
	assert.Equal(t, time.Second, d.ResetAfter)
	clk.Advance(4500 * time.Millisecond)
	rel()
	rel, _, _ = c.Acquire(context.Background(), "k")
	_, d, _ = c.Acquire(context.Background(), "k")
	assert.Equal(t, 5*time.Second, d.RetryAfter, "mean hold 4.5 s rounds up to 5 s")
	clk.Advance(1004500 * time.Millisecond) // mean += (1004.5-4.5)/8 = 129.5 s
	rel()
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
	st := failSlots{memstore.MustNew()}
	open := newConc(t, st, core.NewManualClock(t0), core.ConcurrencyPolicy{Name: "o", Max: 1})
	rel, d, err := open.Acquire(context.Background(), "k")
	var se *core.StoreError
	require.ErrorAs(t, err, &se)
	assert.True(t, d.Allowed)
	assert.True(t, d.Degraded)
	rel()
	closed := newConc(t, st, core.NewManualClock(t0), core.ConcurrencyPolicy{Name: "c", Max: 1, FailMode: core.FailClosed})
	_, d, err = closed.Acquire(context.Background(), "k")
	require.ErrorAs(t, err, &se)
	assert.False(t, d.Allowed)
	assert.True(t, d.Degraded)
	assert.Equal(t, time.Second, d.RetryAfter)
}

// TestNewConcurrencyErrors: bad configuration fails at construction.
func TestNewConcurrencyErrors(t *testing.T) {
	ms := memstore.MustNew()
	for _, tc := range []struct {
		store core.Store
		p     core.ConcurrencyPolicy
		want  string
	}{
		{nil, core.ConcurrencyPolicy{Name: "a", Max: 1}, "nil store"},
		{struct{ core.Store }{ms}, core.ConcurrencyPolicy{Name: "a", Max: 1}, "core.SlotStore"},
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
	store := memstore.MustNew()
	defer store.Close()
	o := &countObserver{n: map[string]int{}}
	c, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "obs", Max: 2}, core.WithObserver(o))
	require.NoError(t, err)
	a, _, _ := c.Acquire(context.Background(), "k")
	b, _, _ := c.Acquire(context.Background(), "k")
	_, d, _ := c.Acquire(context.Background(), "k")
	require.False(t, d.Allowed)
	assert.Equal(t, 2, o.n["obs"])
	a()
	a()
	assert.Equal(t, 1, o.n["obs"])
	b()
	assert.Equal(t, 0, o.n["obs"])
	assert.Equal(t, "in_flight", core.EventInFlight.String())
}
