package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// mapStore is a minimal Store for testing the Limiter: one mutex, a map of
// states, core's math.
type mapStore struct {
	states map[string][]int64
	err    error
	block  bool
}

func (m *mapStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if m.block {
		<-ctx.Done()
		return core.Decision{}, ctx.Err()
	}
	if m.err != nil {
		return core.Decision{}, m.err
	}
	c, err := p.Compile()
	if err != nil {
		return core.Decision{}, err
	}
	st, ok := m.states[p.Name+"\x00"+key]
	if !ok {
		st = make([]int64, c.StateWords())
		m.states[p.Name+"\x00"+key] = st
	}
	return c.Decide(st, now.UnixMicro(), cost), nil
}

func newMapStore() *mapStore { return &mapStore{states: map[string][]int64{}} }

func TestLimiterUsesClock(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_767_000_000, 0))
	l, err := core.NewLimiter(newMapStore(), core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		d, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed)
	}
	d, err := l.Allow(ctx, "k")
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, time.Minute, d.RetryAfter)
	clock.Advance(time.Minute)
	d, err = l.AllowN(ctx, "k", 2)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	_, err = l.AllowN(ctx, "k", -1)
	assert.ErrorIs(t, err, core.ErrInvalidCost)
}

func TestNewLimiterValidates(t *testing.T) {
	_, err := core.NewLimiter(nil, core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(1)}})
	assert.ErrorContains(t, err, "nil store")
	_, err = core.NewLimiter(newMapStore(), core.Policy{Name: "p"})
	assert.ErrorContains(t, err, "no limits")
	_, err = core.NewLimiter(newMapStore(), core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(1)}}, core.WithTimeout(0))
	assert.ErrorContains(t, err, "deadline must be > 0")
	assert.Panics(t, func() { core.MustNewLimiter(newMapStore(), core.Policy{}) })
}

func TestLimiterCopiesPolicy(t *testing.T) {
	p := core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(1)}}
	l := core.MustNewLimiter(newMapStore(), p)
	p.Limits[0] = core.PerSecond(1000)
	assert.Equal(t, core.PerSecond(1), l.Policy().Limits[0])
}

func TestFailModes(t *testing.T) {
	boom := errors.New("connection refused")
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			l := core.MustNewLimiter(&mapStore{err: boom}, core.Policy{Name: "p", FailMode: mode, Limits: []core.Limit{core.PerSecond(1)}})
			d, err := l.Allow(context.Background(), "k")
			var se *core.StoreError
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, boom)
			assert.Equal(t, mode, se.Mode)
			assert.False(t, core.ClassifyError(se) == "timeout")
			assert.True(t, d.Degraded)
			assert.Equal(t, mode == core.FailOpen, d.Allowed)
			assert.Equal(t, "p", d.Policy)
		})
	}
}

// TestStoreDeadline: a call to a store that never answers returns at its
// deadline. The store sees a context whose deadline is the call's start plus
// WithTimeout's duration (taken between the caller's clock readings before
// the call and the store's on entry: ordering, not a bound that host load can
// move), and the call returns a timeout once that deadline has passed, not
// before.
func TestStoreDeadline(t *testing.T) {
	const deadline = 20 * time.Millisecond
	s := &silentStore{seen: make(chan silentSeen, 1)}
	l := core.MustNewLimiter(s, core.Policy{Name: "p", FailMode: core.FailClosed, Limits: []core.Limit{core.PerSecond(1)}}, core.WithTimeout(deadline))
	start := time.Now()
	d, err := l.Allow(context.Background(), "k")
	returned := time.Now()
	var se *core.StoreError
	require.ErrorAs(t, err, &se)
	assert.True(t, core.ClassifyError(se) == "timeout")
	assert.False(t, d.Allowed)
	assert.True(t, d.Degraded)
	seen := <-s.seen
	require.True(t, seen.ok, "the store call has a deadline")
	t.Logf("deadline %v after the call's start, returned %v after it", seen.deadline.Sub(start), returned.Sub(start))
	assert.False(t, seen.deadline.Before(start.Add(deadline)), "the deadline is not shorter than WithTimeout's")
	assert.False(t, seen.deadline.After(seen.entered.Add(deadline)), "the deadline is WithTimeout's from the call, not longer")
	assert.False(t, returned.Before(seen.deadline), "not before the deadline")
}

// silentStore is a store that never answers: each Take records its
// context's deadline and when it was entered, then waits for the context.
type silentStore struct{ seen chan silentSeen }

type silentSeen struct {
	entered, deadline time.Time
	ok                bool
}

func (s *silentStore) Take(ctx context.Context, _ string, _ *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	entered := time.Now()
	dl, ok := ctx.Deadline()
	s.seen <- silentSeen{entered: entered, deadline: dl, ok: ok}
	if !ok {
		return core.Decision{}, errors.New("no deadline")
	}
	<-ctx.Done()
	return core.Decision{}, ctx.Err()
}

func TestAllowAll(t *testing.T) {
	s := newMapStore()
	clock := core.NewManualClock(time.Unix(1_767_000_000, 0))
	user := core.MustNewLimiter(s, core.Policy{Name: "user", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(3)}}, core.WithClock(clock))
	ip := core.MustNewLimiter(s, core.Policy{Name: "ip", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(5)}}, core.WithClock(clock))
	ctx := context.Background()
	d, err := core.AllowAll(ctx, core.Check{Limiter: user, Key: "alice", Cost: 1}, core.Check{Limiter: ip, Key: "1.2.3.4", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, "user", d.Policy, "the binding check has the least remaining")
	assert.Equal(t, int64(2), d.Remaining)
	for i := 0; i < 2; i++ {
		d, err = core.AllowAll(ctx, core.Check{Limiter: user, Key: "alice", Cost: 1}, core.Check{Limiter: ip, Key: "1.2.3.4", Cost: 1})
		require.NoError(t, err)
		assert.True(t, d.Allowed)
	}
	d, err = core.AllowAll(ctx, core.Check{Limiter: user, Key: "alice", Cost: 1}, core.Check{Limiter: ip, Key: "1.2.3.4", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, "user", d.Policy)
	// the denied user check stopped before the IP check: the IP has 2 left
	d, err = ip.AllowN(ctx, "1.2.3.4", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Remaining)
	// another user on the same IP is limited by the IP
	d, err = core.AllowAll(ctx, core.Check{Limiter: user, Key: "bob", Cost: 1}, core.Check{Limiter: ip, Key: "1.2.3.4", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, "ip", d.Policy)
	assert.Equal(t, int64(1), d.Remaining)
	d, err = core.AllowAll(ctx)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "no checks allow")
}

func TestAllowAllFailOpenContinues(t *testing.T) {
	bad := core.MustNewLimiter(&mapStore{err: errors.New("down")}, core.Policy{Name: "bad", Limits: []core.Limit{core.PerSecond(1)}})
	good := core.MustNewLimiter(newMapStore(), core.Policy{Name: "good", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(1)}})
	ctx := context.Background()
	d, err := core.AllowAll(ctx, core.Check{Limiter: bad, Key: "k", Cost: 1}, core.Check{Limiter: good, Key: "k", Cost: 1})
	assert.Error(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, "good", d.Policy, "the real decision is reported, not the degraded one")
	d, err = core.AllowAll(ctx, core.Check{Limiter: bad, Key: "k", Cost: 1}, core.Check{Limiter: good, Key: "k", Cost: 1})
	assert.ErrorContains(t, err, "down", "the failed check's error, not another")
	assert.False(t, d.Allowed, "the healthy check still limits")
	assert.Equal(t, "good", d.Policy)
}

func TestSystemClockFollowsTimeNow(t *testing.T) {
	var c core.SystemClock
	for i := 0; i < 1000; i++ {
		before := time.Now()
		got := c.Now()
		after := time.Now()
		// the anchored reading lies within [before, after] up to the
		// wall/monotonic drift since the anchor (sub-millisecond here)
		assert.False(t, got.Before(before.Add(-time.Millisecond)), "got %v before %v", got, before)
		assert.False(t, got.After(after.Add(time.Millisecond)), "got %v after %v", got, after)
		assert.Contains(t, got.String(), " m=", "monotonic reading present")
	}
}

func BenchmarkClock(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		b.ReportAllocs()
		var s int64
		for i := 0; i < b.N; i++ {
			s += time.Now().UnixNano()
		}
		_ = s
	})
	b.Run("SystemClock", func(b *testing.B) {
		b.ReportAllocs()
		var c core.SystemClock
		var s int64
		for i := 0; i < b.N; i++ {
			s += c.Now().UnixNano()
		}
		_ = s
	})
}

// TestCoarseClockGoroutineStops: the default clock's ticker goroutine is
// gone shortly after the last decision, so goroutine-leak checks in users'
// tests pass.
func TestCoarseClockGoroutineStops(t *testing.T) {
	l, err := core.NewLimiter(&mapStore{states: map[string][]int64{}}, core.Policy{Name: "c", Limits: []core.Limit{core.PerMinute(10)}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !coarseTickerRunning() }, 30*time.Second, 10*time.Millisecond, "no ticker before")
	_, _ = l.Allow(context.Background(), "k")
	assert.True(t, coarseTickerRunning(), "the first read starts the ticker")
	// a cap, not a bound: the idle time is counted in ticks, which a loaded
	// host delays
	require.Eventually(t, func() bool { return !coarseTickerRunning() }, 30*time.Second, 10*time.Millisecond, "the ticker stops when unread")
}

// coarseTickerRunning reports whether a goroutine runs core's coarse
// clock ticker.
func coarseTickerRunning() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Contains(string(buf[:n]), "core.coarseTicker")
}

// deadlineStore is a mapStore that takes deadlines as times
// (TakeBy: the Limiter's deadlineStore), recording what the Limiter gave it.
type deadlineStore struct {
	*mapStore
	takes    int
	deadline time.Time
	ctx      context.Context
}

func (d *deadlineStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	d.takes++
	return d.mapStore.Take(ctx, key, p, now, cost)
}

func (d *deadlineStore) TakeBy(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	d.deadline, d.ctx = deadline, ctx
	if d.err != nil {
		return core.Decision{}, d.err
	}
	return d.mapStore.Take(ctx, key, p, now, cost)
}

// TestLimiterDeadlineStore: a Limiter on a store with TakeBy calls it
// with its per-call deadline as a time, now plus WithTimeout, and the
// caller's own context (no context.WithTimeout per decision); a store
// deadline that passes is a timeout of the store, not the caller's.
func TestLimiterDeadlineStore(t *testing.T) {
	st := &deadlineStore{mapStore: newMapStore()}
	l, err := core.NewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(10)}}, core.WithTimeout(time.Hour))
	require.NoError(t, err)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, 1)
	before := time.Now()
	d, err := l.Allow(ctx, "k")
	after := time.Now()
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Zero(t, st.takes, "Take was called instead of TakeBy")
	assert.Equal(t, ctx, st.ctx, "TakeBy gets the caller's context")
	assert.False(t, st.deadline.Before(before.Add(time.Hour)) || st.deadline.After(after.Add(time.Hour)),
		"deadline %v, want now + 1h (%v to %v)", st.deadline, before.Add(time.Hour), after.Add(time.Hour))

	st.err = fmt.Errorf("store: %w", context.DeadlineExceeded)
	_, err = l.Allow(ctx, "k")
	var se *core.StoreError
	require.ErrorAs(t, err, &se)
	assert.True(t, core.ClassifyError(se) == "timeout")
	assert.NotErrorIs(t, err, core.ErrCallerDone, "the store's deadline passed, not the caller's")
}

// appliedFallbackStore fails every call with err and answers d: a store that
// applied a fallback itself (the fleet tier's FailLocal, or its default
// fail mode for a policy that sets none).
type appliedFallbackStore struct {
	d   core.Decision
	err error
}

func (s appliedFallbackStore) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return s.d, s.err
}

// TestFailModeReportsTheFallbackTheStoreApplied: when the store answers
// a failed call with a Degraded decision of its own, the Limiter keeps
// it and its StoreError names the mode the store applied (a decision
// under a limit: FailLocal; a denial with no limit: FailClosed), not the
// policy's FailOpen.
func TestFailModeReportsTheFallbackTheStoreApplied(t *testing.T) {
	boom := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		d    core.Decision
		mode core.FailMode
	}{
		{"local", core.Decision{Allowed: true, Degraded: true, Limit: core.PerSecond(3), Remaining: 2}, core.FailLocal},
		{"closed", core.Decision{Degraded: true}, core.FailClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := core.MustNewLimiter(appliedFallbackStore{d: tc.d, err: boom}, core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(6)}})
			d, err := l.Allow(context.Background(), "k")
			var se *core.StoreError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.mode, se.Mode, "the mode the store applied")
			assert.Equal(t, tc.d.Allowed, d.Allowed, "the store's decision is kept")
			assert.Equal(t, tc.d.Limit, d.Limit)
			assert.True(t, d.Degraded)
		})
	}
}
