package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteBackDecidesHotKeyLocally(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	tier := newTier(t, batchFake{f}, WithClock(clk), WithSync(100*time.Millisecond), WithMaxLease(64), withoutSyncLoop())
	p := &core.Policy{Name: "hot", Limits: []core.Limit{core.PerSecond(100_000)}}
	ctx := context.Background()
	admitted := int64(0)
	for i := 0; i < 10_000; i++ {
		if i%100 == 0 {
			clk.Advance(time.Millisecond)
		}
		if i%1000 == 999 {
			require.NoError(t, tier.Sync(ctx))
		}
		d, err := tier.Take(ctx, "k", p, clk.Now(), 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.Equal(t, core.PerSecond(100_000), d.Limit)
		admitted++
	}
	assert.Less(t, f.calls.Load(), int64(400), "at most a few dozen units per round trip")
	assert.LessOrEqual(t, admitted, f.charged.Load(), "never admits more than the remote store charged")
	assert.LessOrEqual(t, f.charged.Load()-admitted, int64(64), "what is not spent is at most one lease")
	t.Logf("%d decisions, %d remote takes", admitted, f.calls.Load())
}

// TestWriteBackOverAdmissionBound drives four tiers over one remote store,
// every policy of the conformance suite, through many windows, and checks
// the write-back bound (see checkBound).
func TestWriteBackOverAdmissionBound(t *testing.T) {
	for _, p := range conformkit.Policies() {
		if p.Shadow {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			f := newFake()
			checkBound(t, p, 40*time.Second, func(t *testing.T) storekit.BatchStore { return batchFake{f} })
		})
	}
}

// recorder wraps a remote store and records, in order, the units charged
// by every admitted take (at the take's now: the remote stores decide at
// client time in these tests).
type recorder struct {
	storekit.BatchStore
	mu      sync.Mutex
	charged []charge
}

type charge struct{ t, n int64 }

func (r *recorder) note(d core.Decision, now time.Time, cost int64) {
	if d.Allowed && !d.Shadowed && cost > 0 {
		r.mu.Lock()
		r.charged = append(r.charged, charge{now.UnixMicro(), cost})
		r.mu.Unlock()
	}
}

func (r *recorder) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	d, err := r.BatchStore.Take(ctx, key, p, now, cost)
	if err == nil {
		r.note(d, now, cost)
	}
	return d, err
}

func (r *recorder) TakeBatch(ctx context.Context, b []storekit.BatchTake) error {
	err := r.BatchStore.TakeBatch(ctx, b)
	for i := range b {
		if b[i].Err == nil {
			r.note(b[i].Decision, b[i].Now, b[i].Cost)
		}
	}
	return err
}

// checkBound drives four write-back tiers (lease cap 16, sync 50ms) over
// one remote store with random traffic on one key of p, its limits scaled
// up 40×, for span of simulated time, and asserts the write-back bound: in
// every interval of a limit's window length, the units the fleet admitted
// are at most the units the exact remote store charged in that interval
// plus 4 × the lease cap (the leases outstanding at its start); for the
// fixed window, at most the limit in every window (leases never cross a
// window boundary); and overall never more than the remote store charged.
// It logs the worst excess next to the bound.
func checkBound(t *testing.T, p core.Policy, span time.Duration, remote func(t *testing.T) storekit.BatchStore) {
	const tiers, maxLease = 4, 16
	p.Limits = append([]core.Limit(nil), p.Limits...)
	for i := range p.Limits {
		p.Limits[i].Requests *= 40
		if p.Limits[i].Burst > 0 {
			p.Limits[i].Burst *= 40
		}
	}
	require.NoError(t, p.Validate())
	rec := &recorder{BatchStore: remote(t)}
	var admitted []charge
	clk := core.NewManualClock(t0)
	ts := make([]*fleetStore, tiers)
	for i := range ts {
		ts[i] = newTier(t, rec, WithClock(clk), WithSync(50*time.Millisecond), WithMaxLease(maxLease))
	}
	// The bound is the configured cap's, not the cap the tier computed
	// (which is at most it): a tier that ignored WithMaxLease would
	// otherwise raise its own bound.
	const bound int64 = tiers * maxLease
	rng := rand.New(rand.NewPCG(uint64(len(p.Name)), 5))
	ctx := context.Background()
	nextSync := clk.Now().Add(50 * time.Millisecond)
	end := t0.Add(span)
	decisions := 0
	for clk.Now().Before(end) {
		clk.Advance(time.Duration(rng.IntN(2000)) * time.Microsecond)
		for !clk.Now().Before(nextSync) {
			for _, s := range ts {
				require.NoError(t, s.Sync(ctx))
			}
			nextSync = nextSync.Add(50 * time.Millisecond)
		}
		cost := int64(1 + rng.IntN(2))
		now := clk.Now()
		d, err := ts[rng.IntN(tiers)].Take(ctx, "k", &p, now, cost)
		require.NoError(t, err)
		decisions++
		if d.Allowed {
			admitted = append(admitted, charge{now.UnixMicro(), cost})
		}
	}
	charged := rec.charged
	sort.SliceStable(charged, func(i, j int) bool { return charged[i].t < charged[j].t })
	sum := func(evs []charge, from, to int64) (n int64) {
		i := sort.Search(len(evs), func(i int) bool { return evs[i].t >= from })
		for ; i < len(evs) && evs[i].t < to; i++ {
			n += evs[i].n
		}
		return n
	}
	tot, totc := sum(admitted, 0, 1<<62), sum(charged, 0, 1<<62)
	if !p.CountDenied {
		// A lease is at most WithMaxLease units: no remote take charges
		// more than one request's cost (at most 2 here) plus the cap.
		// (Counted denials are charged in bulk at a sync.)
		for _, c := range charged {
			require.LessOrEqual(t, c.n, int64(maxLease+2), "a remote take at +%dµs leased more than WithMaxLease", c.t-t0.UnixMicro())
		}
	}
	require.LessOrEqual(t, tot, totc, "the fleet never admits more than the remote store charged")
	worst := int64(-1 << 62)
	for _, l := range p.Limits {
		w := l.Window.Microseconds()
		for x := t0.UnixMicro(); x < end.UnixMicro(); x += 997 {
			over := sum(admitted, x, x+w) - sum(charged, x, x+w)
			worst = max(worst, over)
			require.LessOrEqual(t, over, bound, "interval at +%dµs of %v", x-t0.UnixMicro(), l.Window)
		}
		if p.Algorithm == core.FixedWindow {
			for x := (t0.UnixMicro()/w + 1) * w; x+w < end.UnixMicro(); x += w {
				require.LessOrEqual(t, sum(admitted, x, x+w), l.Requests, "fixed window at %d", x)
			}
		}
	}
	t.Logf("%s: admitted %d of %d charged; worst excess over the exact store in one window %d, bound %d (4 × WithMaxLease %d); %d decisions",
		p.Name, tot, totc, worst, bound, maxLease, decisions)
}

func TestLocalTableIsBounded(t *testing.T) {
	f := newFake()
	tier := newTier(t, batchFake{f}, WithSync(time.Second), WithMaxKeys(256))
	p := &core.Policy{Name: "flood", Limits: []core.Limit{core.Per(1, time.Minute)}}
	ctx := context.Background()
	for i := 0; i < 20_000; i++ {
		_, err := tier.Take(ctx, "k"+strconv.Itoa(i), p, t0, 2) // denied: Never, cached
		require.NoError(t, err)
	}
	n := 0
	for i := range tier.shards {
		n += len(tier.shards[i].m)
	}
	assert.LessOrEqual(t, n, 256)
	assert.Positive(t, n)
}

// TestSyncIsOneRoundTrip: renewing many hot keys takes one batch.
func TestSyncIsOneRoundTrip(t *testing.T) {
	f := newFake()
	clk := core.NewManualClock(t0)
	ev := &events{}
	tier := newTier(t, batchFake{f}, WithClock(clk), WithSync(time.Second), WithObserver(ev))
	p := &core.Policy{Name: "many", Limits: []core.Limit{core.PerSecond(10_000)}}
	ctx := context.Background()
	for round := 0; round < 6; round++ {
		for k := 0; k < 100; k++ {
			for j := 0; j < 3; j++ {
				_, err := tier.Take(ctx, fmt.Sprint("k", k), p, clk.Now(), 1)
				require.NoError(t, err)
			}
		}
	}
	b := f.batches.Load()
	require.NoError(t, tier.Sync(ctx))
	assert.Equal(t, b+1, f.batches.Load())
	syncs := ev.kinds(core.EventSync)
	require.NotEmpty(t, syncs)
	assert.Equal(t, 100, syncs[len(syncs)-1].Keys, "every hot key renewed in that round trip")
	assert.NoError(t, syncs[len(syncs)-1].Err)
}

// TestLeaseRetryFailureReleasesTheGrab: a lease request that does not fit
// is retried alone; when that retry fails, the key can still lease later
// (regression: the in-flight mark was left set).
func TestLeaseRetryFailureReleasesTheGrab(t *testing.T) {
	f := newFake()
	tier := newTier(t, batchFake{f}, WithSync(time.Minute))
	p := &core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(100)}}
	ctx := context.Background()
	take := func() (core.Decision, error) { return tier.Take(ctx, "k", p, t0, 1) }
	_, err := take() // first sight: remote
	require.NoError(t, err)
	_, err = take() // leases 2
	require.NoError(t, err)
	_, err = f.Take(ctx, "k", p, t0, 96) // another server takes the rest
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		d, err := take()
		require.NoError(t, err)
		require.True(t, d.Allowed, "leased units")
	}
	f.failAt.Store(f.calls.Load() + 2) // the lease request is denied, its retry fails
	_, err = take()
	require.ErrorIs(t, err, errDown)
	sh := &tier.shards[0]
	for i := range tier.shards {
		if tier.shards[i].m[ekey{p, "k"}] != nil {
			sh = &tier.shards[i]
		}
	}
	sh.mu.Lock()
	grabbing := sh.m[ekey{p, "k"}].grab != nil
	sh.mu.Unlock()
	assert.False(t, grabbing)
}

// TestRequestsWaitForTheLeaseInFlight: while one request of a key is
// leasing, others finding the lease empty wait for it instead of each
// making a round trip, and are then served from the new lease.
func TestRequestsWaitForTheLeaseInFlight(t *testing.T) {
	f := newFake()
	tier := newTier(t, batchFake{f}, WithSync(time.Minute))
	p := &core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(1000)}}
	ctx := context.Background()
	_, err := tier.Take(ctx, "k", p, t0, 1) // first sight: the entry exists
	require.NoError(t, err)
	var sh *shard
	for i := range tier.shards {
		if tier.shards[i].m[ekey{p, "k"}] != nil {
			sh = &tier.shards[i]
		}
	}
	require.NotNil(t, sh)
	sh.mu.Lock()
	e := sh.m[ekey{p, "k"}]
	e.startGrab() // a lease request in flight
	sh.mu.Unlock()
	calls := f.calls.Load()
	const waiters = 10
	done := make(chan core.Decision, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			d, err := tier.Take(ctx, "k", p, t0, 1)
			assert.NoError(t, err)
			done <- d
		}()
	}
	// every waiter is parked in Take's select on the lease in flight
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		n := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "fleet.(*fleetStore).Take(") {
				n++
			}
		}
		return n == waiters
	}, 5*time.Second, time.Millisecond)
	sh.mu.Lock()
	e.grant(e.pi, t0.UnixMicro(), waiters, core.Decision{Allowed: true, Limit: core.PerMinute(1000), Remaining: 900})
	e.endGrab()
	sh.mu.Unlock()
	for i := 0; i < waiters; i++ {
		assert.True(t, (<-done).Allowed)
	}
	assert.Equal(t, calls, f.calls.Load(), "served from the lease they waited for")
}

// TestWriteBackConcurrent: 4 tiers × 8 goroutines hammer one fixed-window
// key in one window while sync rounds run concurrently: the fleet admits
// at most the limit (fixed-window leases never cross the window), and at
// least the limit less the leases left unused at the end.
func TestWriteBackConcurrent(t *testing.T) {
	const tiers, perTier, limit = 4, 8, 4000
	f := newFake()
	clk := core.NewManualClock(t0.Truncate(time.Hour))
	p := &core.Policy{Name: "fw", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(limit)}}
	ts := make([]*fleetStore, tiers)
	for i := range ts {
		ts[i] = newTier(t, batchFake{f}, WithClock(clk), WithSync(time.Minute), WithMaxLease(64))
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				for _, s := range ts {
					assert.NoError(t, s.Sync(context.Background()))
				}
			}
		}
	}()
	for g := 0; g < tiers*perTier; g++ {
		wg.Add(1)
		go func(s *fleetStore) {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				d, err := s.Take(context.Background(), "k", p, clk.Now(), 1)
				if !assert.NoError(t, err) {
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}(ts[g%tiers])
	}
	wg.Wait()
	close(stop)
	assert.LessOrEqual(t, admitted.Load(), int64(limit))
	assert.GreaterOrEqual(t, admitted.Load(), int64(limit-tiers*64), "unused leases at most the lease cap per tier")
	assert.LessOrEqual(t, admitted.Load(), f.charged.Load())
	t.Logf("admitted %d of %d (charged %d, %d remote takes for %d requests)", admitted.Load(), limit, f.charged.Load(), f.calls.Load(), tiers*perTier*400)
}

// TestLeaseAtMostHalfTheRemaining: a lease is never more than half of what
// the remote store reported remaining, so the fleet leaves room for others
// and a nearly exhausted key goes exact.
func TestLeaseAtMostHalfTheRemaining(t *testing.T) {
	f := newFake()
	tier := newTier(t, batchFake{f}, WithSync(time.Minute), WithMaxLease(1000))
	p := &core.Policy{Name: "p", Limits: []core.Limit{core.PerHour(100)}}
	ctx := context.Background()
	prev := f.charged.Load()
	for i := 0; i < 100; i++ {
		before := f.peek("k", p, t0, 0).Remaining
		calls := f.calls.Load()
		_, err := tier.Take(ctx, "k", p, t0, 1)
		require.NoError(t, err)
		if f.calls.Load() > calls {
			leased := f.charged.Load() - prev - 1
			assert.LessOrEqual(t, leased, before/2, "request %d: leased %d of %d remaining", i, leased, before)
		}
		prev = f.charged.Load()
	}
}
