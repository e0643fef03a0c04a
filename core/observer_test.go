package core_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// countingBlockStore blocks every call until its context is done and counts
// the calls that reached it.
type countingBlockStore struct{ calls atomic.Int64 }

func (s *countingBlockStore) Take(ctx context.Context, _ string, _ *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return core.Decision{}, ctx.Err()
}

// TestAllowAllSharesOneDeadline guards the review's finding that 8 hybrid
// checks against a hung store cost 8 deadlines: after the first check used
// up the shared deadline, the others must not reach the store.
func TestAllowAllSharesOneDeadline(t *testing.T) {
	st := &countingBlockStore{}
	var checks []core.Check
	for i := 0; i < 8; i++ {
		l, err := core.NewLimiter(st, core.Policy{Name: fmt.Sprintf("p%d", i), Limits: []core.Limit{core.PerMinute(10)}},
			core.WithTimeout(5*time.Millisecond))
		require.NoError(t, err)
		checks = append(checks, core.Check{Limiter: l, Key: "k", Cost: 1})
	}
	d, err := core.AllowAll(context.Background(), checks...)
	require.Error(t, err)
	assert.True(t, d.Allowed && d.Degraded, "fail open applies")
	assert.Equal(t, int64(1), st.calls.Load(), "only the first check may wait for the hung store")
	var se *core.StoreError
	require.ErrorAs(t, err, &se)
	assert.True(t, core.ClassifyError(se) == "timeout")
}

func TestLimiterSkipsStoreWhenContextDone(t *testing.T) {
	st := &countingBlockStore{}
	l, err := core.NewLimiter(st, core.Policy{Name: "p", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(10)}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := l.Allow(ctx, "k")
	require.Error(t, err)
	assert.False(t, d.Allowed)
	assert.True(t, d.Degraded)
	assert.Zero(t, st.calls.Load())
}

func TestObserverSeesEveryDecision(t *testing.T) {
	var events []core.Event
	obs := core.ObserverFunc(func(e core.Event) { events = append(events, e) })
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	ms := &mapStore{states: map[string][]int64{}}
	l, err := core.NewLimiter(ms, core.Policy{Name: "obs", Limits: []core.Limit{core.PerMinute(1)}}, core.WithClock(clk), core.WithObserver(obs))
	require.NoError(t, err)
	_, err = l.Allow(context.Background(), "k")
	require.NoError(t, err)
	_, err = l.Allow(context.Background(), "k")
	require.NoError(t, err)
	ms.err = errors.New("boom")
	_, err = l.Allow(context.Background(), "k")
	require.Error(t, err)

	require.Len(t, events, 3)
	for _, e := range events {
		assert.Equal(t, core.EventDecision, e.Kind)
		assert.Equal(t, "obs", e.Policy)
	}
	assert.True(t, events[0].Decision.Allowed)
	assert.False(t, events[1].Decision.Allowed || events[1].Decision.Degraded, "denied")
	assert.True(t, events[2].Decision.Degraded)
	assert.Error(t, events[2].Err)
	assert.Equal(t, "other", core.ClassifyError(events[2].Err))
}

type nopObserver struct{ n int }

func (o *nopObserver) Observe(e core.Event) {
	if e.Decision.Allowed {
		o.n++
	}
}

func TestObserverAllocatesNothing(t *testing.T) {
	ms := &mapStore{states: map[string][]int64{}}
	o := &nopObserver{}
	l, err := core.NewLimiter(ms, core.Policy{Name: "obs", Limits: []core.Limit{core.PerMinute(50_000_000)}}, core.WithObserver(o))
	require.NoError(t, err)
	ctx := context.Background()
	_, _ = l.Allow(ctx, "k")
	// mapStore's own map lookups allocate nothing for an existing key; the
	// context deadline of a remote call allocates, so compare with and
	// without the observer.
	without, err := core.NewLimiter(ms, core.Policy{Name: "obs", Limits: []core.Limit{core.PerMinute(50_000_000)}})
	require.NoError(t, err)
	base := testing.AllocsPerRun(100, func() { _, _ = without.Allow(ctx, "k") })
	with := testing.AllocsPerRun(100, func() { _, _ = l.Allow(ctx, "k") })
	assert.Equal(t, base, with, "the observer must not add allocations")
	assert.Positive(t, o.n)
}

type fallbackStore struct{ mapStore }

func (f *fallbackStore) FallsBackLocally() bool { return true }

func TestFailLocalNeedsAFallbackStore(t *testing.T) {
	p := core.Policy{Name: "fl", FailMode: core.FailLocal, Limits: []core.Limit{core.PerMinute(10)}}
	_, err := core.NewLimiter(&mapStore{states: map[string][]int64{}}, p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fail mode local")

	fs := &fallbackStore{mapStore{states: map[string][]int64{}}}
	_, err = core.NewLimiter(fs, p)
	require.NoError(t, err)

	var m core.FailMode
	require.NoError(t, m.UnmarshalText([]byte("local")))
	assert.Equal(t, core.FailLocal, m)
	b, err := m.MarshalText()
	require.NoError(t, err)
	assert.Equal(t, "local", string(b))
}

// degradedStore fails but decides by itself, as the fleet tier does under
// FailLocal.
type degradedStore struct{}

func (degradedStore) Take(_ context.Context, _ string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	return core.Decision{Policy: p.Name, Allowed: false, Degraded: true, RetryAfter: 7 * time.Second}, errors.New("remote down")
}
func (degradedStore) FallsBackLocally() bool { return true }

func TestLimiterKeepsAStoresFallbackDecision(t *testing.T) {
	l, err := core.NewLimiter(degradedStore{}, core.Policy{Name: "fl", FailMode: core.FailLocal, Limits: []core.Limit{core.PerMinute(10)}})
	require.NoError(t, err)
	d, err := l.Allow(context.Background(), "k")
	require.Error(t, err)
	assert.False(t, d.Allowed)
	assert.True(t, d.Degraded)
	assert.Equal(t, 7*time.Second, d.RetryAfter)
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("redis: %w", context.DeadlineExceeded), "timeout"},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, "timeout"},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "connection"},
		{fmt.Errorf("x: %w", syscall.ECONNRESET), "connection"},
		{io.EOF, "connection"},
		{&net.DNSError{Err: "no such host", Name: "redis"}, "connection"},
		{fmt.Errorf("tier: %w", core.ErrCircuitOpen), "circuit_open"},
		{errors.New("ERR Error running script"), "other"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("redis: %w", context.Canceled), "canceled"},
	} {
		assert.Equal(t, tc.want, core.ClassifyError(tc.err), "%v", tc.err)
	}
}

func TestPolicyModeValidation(t *testing.T) {
	base := core.Policy{Name: "m", Limits: []core.Limit{core.PerMinute(10)}}
	for _, tc := range []struct {
		mut  func(p *core.Policy)
		want string
	}{
		{func(p *core.Policy) { p.Mode = core.ModeWriteBack; p.Sync = 100 * time.Millisecond }, ""},
		{func(p *core.Policy) { p.Sync = time.Second }, ""},
		{func(p *core.Policy) { p.Mode = core.ModeExact; p.Sync = time.Second }, "applies to mode write-back only"},
		{func(p *core.Policy) { p.Sync = -1 }, "sync must be in"},
		{func(p *core.Policy) { p.Sync = 2 * time.Hour }, "sync must be in"},
		{func(p *core.Policy) { p.Mode = 9 }, "unknown mode"},
		{func(p *core.Policy) { p.FleetSize = -1 }, "fleet_size"},
		{func(p *core.Policy) { p.FleetSize = core.MaxFleetSize + 1 }, "fleet_size"},
		{func(p *core.Policy) { p.FailMode = 9 }, "unknown fail mode"},
	} {
		p := base
		tc.mut(&p)
		err := p.Validate()
		if tc.want == "" {
			assert.NoError(t, err)
		} else if assert.Error(t, err) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
	for in, want := range map[string]core.Mode{"": core.ModeDefault, "exact": core.ModeExact, "write-back": core.ModeWriteBack, "WriteBack": core.ModeWriteBack, "write_back": core.ModeWriteBack} {
		var m core.Mode
		require.NoError(t, m.UnmarshalText([]byte(in)), in)
		assert.Equal(t, want, m, in)
	}
	var m core.Mode
	assert.Error(t, m.UnmarshalText([]byte("lazy")))
}

type ctxKey struct{}

// Every verb reports its own kind of event, with the caller's context, so
// that an exporter can link it to the request's trace; only AllowN with a
// cost (and WaitN's store calls) is a decision.
func TestObserverEventKindsCarryTheContext(t *testing.T) {
	var events []core.Event
	obs := core.ObserverFunc(func(e core.Event) { events = append(events, e) })
	st := mustMem()
	defer st.Close()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l := core.MustNewLimiter(st, core.Policy{Name: "kinds", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(2)}},
		core.WithClock(clk), core.WithObserver(obs))
	ctx := context.WithValue(context.Background(), ctxKey{}, "request-1")
	steps := []struct {
		do   func() error
		kind string // kindOf's
		out  bool   // Decision.Allowed
	}{
		{func() error { _, err := l.Allow(ctx, "k"); return err }, "decision", true},
		{func() error { _, err := l.AllowN(ctx, "k", 0); return err }, "peek", true},
		{func() error { _, err := l.PeekN(ctx, "k", 1); return err }, "peek", true},
		{func() error { _, err := l.Charge(ctx, "k", 1); return err }, "charge", false},
		{func() error { _, err := l.Allow(ctx, "k"); return err }, "decision", false},
		{func() error { _, err := l.Refund(ctx, "k", 1); return err }, "refund", true},
		{func() error { return l.Wait(ctx, "k") }, "decision", true},
		{func() error { return l.Reset(ctx, "k") }, "reset", false},
	}
	for i, s := range steps {
		events = events[:0]
		require.NoError(t, s.do(), "step %d", i)
		require.Len(t, events, 1, "step %d (%v)", i, s.kind)
		e := events[0]
		assert.Equal(t, s.kind, kindOf(e), "step %d", i)
		assert.Equal(t, s.out, e.Decision.Allowed, "step %d (%v)", i, s.kind)
		assert.Equal(t, "kinds", e.Policy, "step %d", i)
		require.NotNil(t, e.Context, "step %d (%v)", i, s.kind)
		assert.Equal(t, "request-1", e.Context.Value(ctxKey{}), "step %d (%v)", i, s.kind)
	}
	assert.Equal(t, "verb", core.EventVerb.String())
}

// kindOf names an event: its kind, or for an EventVerb its verb.
func kindOf(e core.Event) string {
	if e.Kind == core.EventVerb {
		return e.Verb
	}
	return e.Kind.String()
}

// A remote store's events carry the caller's context too (the Limiter
// wraps it with its store deadline, which keeps its values).
func TestObserverContextOfARemoteStore(t *testing.T) {
	var got []any
	obs := core.ObserverFunc(func(e core.Event) { got = append(got, e.Context.Value(ctxKey{})) })
	ms := &mapStore{states: map[string][]int64{}}
	l := core.MustNewLimiter(ms, core.Policy{Name: "remote", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(obs))
	ctx := context.WithValue(context.Background(), ctxKey{}, "r")
	_, _ = l.Allow(ctx, "k")
	ms.err = errors.New("boom")
	_, _ = l.Allow(ctx, "k")
	assert.Equal(t, []any{"r", "r"}, got)
}

// A verb's store failure reaches the observer with its error, under the
// verb's own kind: the Prometheus and OTel exporters do not count it as a
// degraded decision.
func TestObserverVerbFailures(t *testing.T) {
	var events []core.Event
	obs := core.ObserverFunc(func(e core.Event) { events = append(events, e) })
	l := core.MustNewLimiter(failingVerbs{errors.New("down")}, core.Policy{Name: "f", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(obs))
	ctx := context.Background()
	_, _ = l.PeekN(ctx, "k", 1)
	_, _ = l.Charge(ctx, "k", 1)
	_, _ = l.Refund(ctx, "k", 1)
	_ = l.Reset(ctx, "k")
	require.Len(t, events, 4)
	for i, k := range []string{"peek", "charge", "refund", "reset"} {
		assert.Equal(t, k, kindOf(events[i]))
		assert.Error(t, events[i].Err, k)
	}
	assert.Equal(t, core.Decision{}, events[3].Decision, "a reset reports no decision")
}
