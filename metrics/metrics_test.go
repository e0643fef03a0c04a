package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/metrics"
)

// flakyStore decides with core's math in a map, or fails with err, taking
// latency per call (reported by the Limiter, which times remote stores).
type flakyStore struct {
	mu     sync.Mutex
	states map[string][]int64
	err    error
}

func (s *flakyStore) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return core.Decision{}, s.err
	}
	c, err := p.Compile()
	if err != nil {
		return core.Decision{}, err
	}
	st, ok := s.states[p.Name+"\x00"+key]
	if !ok {
		st = make([]int64, c.StateWords())
		s.states[p.Name+"\x00"+key] = st
	}
	return c.Decide(st, now.UnixMicro(), cost), nil
}

func newRegistry(t *testing.T, opts ...metrics.Option) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	m, err := metrics.New(opts...)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	return m, reg
}

func TestDecisionsErrorsAndLatency(t *testing.T) {
	m, reg := newRegistry(t)
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	st := &flakyStore{states: map[string][]int64{}}
	quiet := core.WithLogger(nil)
	l := core.MustNewLimiter(st, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clk), core.WithObserver(m), quiet)
	shadow := core.MustNewLimiter(st, core.Policy{Name: "beta", Shadow: true, Limits: []core.Limit{core.PerMinute(1)}}, core.WithClock(clk), core.WithObserver(m), quiet)
	ctx := context.Background()
	for range 3 {
		_, _ = l.Allow(ctx, "k") // allowed, allowed, denied
	}
	for range 2 {
		_, _ = shadow.Allow(ctx, "k") // allowed, shadowed
	}
	st.err = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	_, _ = l.Allow(ctx, "k")
	st.err = errors.New("ERR Error running script")
	_, _ = l.Allow(ctx, "k")
	st.err = fmt.Errorf("redis: %w", context.DeadlineExceeded)
	_, _ = l.Allow(ctx, "k")

	want := `
# HELP limitkit_decisions_total Decisions by policy and outcome: allowed, denied, shadowed (a shadow policy would have denied), elastic (admitted above the limits by elastic throttling), degraded (the store failed; the fail mode decided).
# TYPE limitkit_decisions_total counter
limitkit_decisions_total{outcome="allowed",policy="beta"} 1
limitkit_decisions_total{outcome="allowed",policy="login"} 2
limitkit_decisions_total{outcome="degraded",policy="beta"} 0
limitkit_decisions_total{outcome="degraded",policy="login"} 3
limitkit_decisions_total{outcome="denied",policy="beta"} 0
limitkit_decisions_total{outcome="denied",policy="login"} 1
limitkit_decisions_total{outcome="elastic",policy="beta"} 0
limitkit_decisions_total{outcome="elastic",policy="login"} 0
limitkit_decisions_total{outcome="shadowed",policy="beta"} 1
limitkit_decisions_total{outcome="shadowed",policy="login"} 0
# HELP limitkit_store_errors_total Store failures by policy and kind: timeout, connection, circuit_open, canceled, other, and the kinds of a store's error replies as they occur (tryagain, clusterdown, redirect, readonly, loading, oom, script). Each one is a degraded decision.
# TYPE limitkit_store_errors_total counter
limitkit_store_errors_total{kind="canceled",policy="beta"} 0
limitkit_store_errors_total{kind="canceled",policy="login"} 0
limitkit_store_errors_total{kind="circuit_open",policy="beta"} 0
limitkit_store_errors_total{kind="circuit_open",policy="login"} 0
limitkit_store_errors_total{kind="connection",policy="beta"} 0
limitkit_store_errors_total{kind="connection",policy="login"} 1
limitkit_store_errors_total{kind="other",policy="beta"} 0
limitkit_store_errors_total{kind="other",policy="login"} 1
limitkit_store_errors_total{kind="timeout",policy="beta"} 0
limitkit_store_errors_total{kind="timeout",policy="login"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "limitkit_decisions_total", "limitkit_store_errors_total"))
	// The store does "I/O" (it is not a LocalStore): every call is timed.
	n, err := testutil.GatherAndCount(reg, "limitkit_store_latency_seconds")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "one histogram per policy")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "limitkit_store_latency_seconds" {
			for _, mt := range mf.GetMetric() {
				want := map[string]uint64{"login": 6, "beta": 2}[mt.GetLabel()[0].GetValue()]
				assert.Equal(t, want, mt.GetHistogram().GetSampleCount(), mt.String())
			}
		}
	}
}

func TestEmbeddedStoreIsNotTimed(t *testing.T) {
	m, reg := newRegistry(t)
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	l := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(5)}}, core.WithObserver(m))
	_, err = l.Allow(context.Background(), "k")
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, "limitkit_store_latency_seconds")
	require.NoError(t, err)
	assert.Zero(t, n, "no empty latency histogram for a store that does no I/O")
}

func TestPolicyLabelsAreCapped(t *testing.T) {
	m, reg := newRegistry(t, metrics.WithMaxPolicies(2))
	for i := range 50 {
		name := fmt.Sprintf("p%d", i)
		m.Observe(core.Event{Kind: core.EventDecision, Policy: name, Decision: core.Decision{Allowed: true}})
		m.Observe(core.Event{Kind: core.EventDenyCacheHit, Policy: name})
	}
	want := `
# HELP limitkit_deny_cache_hits_total Decisions a store tier denied from its local deny cache without calling the remote store.
# TYPE limitkit_deny_cache_hits_total counter
limitkit_deny_cache_hits_total{policy="other"} 48
limitkit_deny_cache_hits_total{policy="p0"} 1
limitkit_deny_cache_hits_total{policy="p1"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "limitkit_deny_cache_hits_total"))
	n, err := testutil.GatherAndCount(reg, "limitkit_decisions_total")
	require.NoError(t, err)
	assert.Equal(t, 3*5, n, "p0, p1 and other, five outcomes each")
}

// TestEqualNamesShareSeries: two limiters whose policies have the same
// name (different strings) count into one series.
func TestEqualNamesShareSeries(t *testing.T) {
	m, reg := newRegistry(t)
	a := strings.Repeat("x", 3)
	b := strings.Repeat("x", 3)
	m.Observe(core.Event{Kind: core.EventDecision, Policy: a})
	m.Observe(core.Event{Kind: core.EventDecision, Policy: b})
	m.Observe(core.Event{Kind: core.EventDecision, Policy: a})
	assert.Equal(t, 3.0, gauge(t, reg, "limitkit_decisions_total", map[string]string{"policy": "xxx", "outcome": "denied"}))
}

func TestFleetTierEvents(t *testing.T) {
	m, reg := newRegistry(t)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, e := range []core.Event{
		{Kind: core.EventDenyCacheHit, Policy: "api"},
		{Kind: core.EventDenyCacheHit, Policy: "api"},
		{Kind: core.EventFallback, Policy: "api", Decision: core.Decision{Degraded: true}, Err: refused},
		{Kind: core.EventSync, Keys: 40, Latency: 2 * time.Millisecond},
		{Kind: core.EventSync, Keys: 2, Latency: 50 * time.Millisecond, Err: fmt.Errorf("x: %w", context.DeadlineExceeded)},
		{Kind: core.EventBreaker, Policy: "api", From: "closed", To: "open"},
		{Kind: core.EventBreaker, Policy: "api", From: "open", To: "half_open"},
		{Kind: core.EventBreaker, Policy: "api", From: "half_open", To: "open"},
		{Kind: core.EventBreaker, Policy: "api", To: "nine"}, // unknown: ignored
		{Kind: core.EventKind(99), Policy: "api"},            // unknown: ignored
	} {
		m.Observe(e)
	}
	want := `
# HELP limitkit_breaker_state State of a store tier's circuit breaker: 0 closed, 1 open, 2 half-open.
# TYPE limitkit_breaker_state gauge
limitkit_breaker_state{policy="api"} 1
# HELP limitkit_breaker_transitions_total Changes of a store tier's circuit breaker, by the state entered.
# TYPE limitkit_breaker_transitions_total counter
limitkit_breaker_transitions_total{policy="api",to="half_open"} 1
limitkit_breaker_transitions_total{policy="api",to="open"} 2
# HELP limitkit_deny_cache_hits_total Decisions a store tier denied from its local deny cache without calling the remote store.
# TYPE limitkit_deny_cache_hits_total counter
limitkit_deny_cache_hits_total{policy="api"} 2
# HELP limitkit_fallbacks_total Decisions a store tier made locally because the remote store failed or its breaker was open.
# TYPE limitkit_fallbacks_total counter
limitkit_fallbacks_total{policy="api"} 1
# HELP limitkit_sync_errors_total Failed syncs of a store tier, by kind: timeout, connection, circuit_open, canceled, other.
# TYPE limitkit_sync_errors_total counter
limitkit_sync_errors_total{kind="timeout"} 1
# HELP limitkit_sync_keys_total Entries sent by a store tier's syncs.
# TYPE limitkit_sync_keys_total counter
limitkit_sync_keys_total 42
# HELP limitkit_syncs_total Round trips of a store tier's write-back sync, by result: ok or error.
# TYPE limitkit_syncs_total counter
limitkit_syncs_total{result="error"} 1
limitkit_syncs_total{result="ok"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "limitkit_breaker_state", "limitkit_breaker_transitions_total",
		"limitkit_deny_cache_hits_total", "limitkit_fallbacks_total", "limitkit_sync_errors_total", "limitkit_sync_keys_total", "limitkit_syncs_total"))
	n, err := testutil.GatherAndCount(reg, "limitkit_sync_latency_seconds")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestWatchMemstore(t *testing.T) {
	m, reg := newRegistry(t)
	st, err := memstore.New(memstore.WithMaxKeys(256))
	require.NoError(t, err)
	defer st.Close()
	m.WatchMemstore("default", st)
	l := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(5)}}, core.WithObserver(m))
	for i := range 5000 {
		_, err := l.Allow(context.Background(), fmt.Sprint("k", i))
		require.NoError(t, err)
	}
	s := st.Stats()
	require.Positive(t, s.Keys)
	assert.Equal(t, float64(s.Keys), gauge(t, reg, "limitkit_memstore_keys", map[string]string{"store": "default"}))
	assert.Equal(t, float64(s.Evictions), gauge(t, reg, "limitkit_memstore_evictions_total", map[string]string{"store": "default"}))
	assert.Positive(t, s.Evictions, "5000 keys over a cap of 256 per policy evict")

	other, err := memstore.New()
	require.NoError(t, err)
	defer other.Close()
	m.WatchMemstore("default", other) // replaces
	assert.Equal(t, 0.0, gauge(t, reg, "limitkit_memstore_keys", map[string]string{"store": "default"}))
	m.WatchMemstore("default", nil) // stops
	m.WatchMemstore("never", nil)
	n, err := testutil.GatherAndCount(reg, "limitkit_memstore_keys")
	require.NoError(t, err)
	assert.Zero(t, n)
}

// gauge returns the value of the series of name with exactly labels.
func gauge(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, mt := range mf.GetMetric() {
			if len(mt.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range mt.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			switch {
			case mt.GetCounter() != nil:
				return mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				return mt.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func TestOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  metrics.Option
		err  string
	}{
		{"zero cap", metrics.WithMaxPolicies(0), "WithMaxPolicies(0)"},
		{"no buckets", metrics.WithLatencyBuckets(), "no buckets"},
		{"decreasing buckets", metrics.WithLatencyBuckets(0.1, 0.01), "increasing"},
		{"negative bucket", metrics.WithLatencyBuckets(-1), "positive"},
		{"bad namespace", metrics.WithNamespace("my-app"), "not a valid metric name prefix"},
		{"nil option", nil, "nil Option"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := metrics.New(tt.opt)
			assert.ErrorContains(t, err, tt.err)
		})
	}
	assert.Panics(t, func() { metrics.MustNew(metrics.WithMaxPolicies(-1)) })

	m, reg := newRegistry(t, metrics.WithNamespace("api"), metrics.WithConstLabels(prometheus.Labels{"tier": "a"}), metrics.WithLatencyBuckets(0.001, 0.01))
	m.Observe(core.Event{Kind: core.EventDecision, Policy: "p", Decision: core.Decision{Allowed: true}, Latency: time.Millisecond})
	assert.Equal(t, 1.0, gauge(t, reg, "api_decisions_total", map[string]string{"policy": "p", "outcome": "allowed", "tier": "a"}))
}

func TestObserveDoesNotAllocate(t *testing.T) {
	m := metrics.MustNew()
	name := "api1-get"
	for _, e := range []core.Event{
		{Kind: core.EventDecision, Policy: name, Decision: core.Decision{Allowed: true}},
		{Kind: core.EventDecision, Policy: name, Latency: time.Millisecond},
		{Kind: core.EventDenyCacheHit, Policy: name},
		{Kind: core.EventSync, Keys: 3, Latency: time.Millisecond},
	} {
		m.Observe(e) // first sight creates the series
		assert.Zero(t, testing.AllocsPerRun(100, func() { m.Observe(e) }), e.Kind.String())
	}
}

// TestConcurrentObserveAndCollect runs observers over many policies while
// scraping, for the race detector, and checks nothing is lost.
func TestConcurrentObserveAndCollect(t *testing.T) {
	m, reg := newRegistry(t, metrics.WithMaxPolicies(5))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				m.Observe(core.Event{Kind: core.EventDecision, Policy: fmt.Sprint("p", (g+i)%10), Decision: core.Decision{Allowed: true}})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			_, err := reg.Gather()
			assert.NoError(t, err)
		}
	}()
	wg.Wait()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var total float64
	for _, mf := range mfs {
		if mf.GetName() == "limitkit_decisions_total" {
			for _, mt := range mf.GetMetric() {
				total += mt.GetCounter().GetValue()
			}
			assert.Len(t, mf.GetMetric(), 6*5, "5 policies and other, five outcomes each")
		}
	}
	assert.Equal(t, 2000.0, total)
}

// replyKindErr is a store's error reply of a kind (as redisstore's
// ReplyError is).
type replyKindErr string

func (k replyKindErr) Error() string     { return "OOM command not allowed" }
func (k replyKindErr) ErrorKind() string { return string(k) }

// TestReplyKindSeries: a store's error reply is counted under its own
// kind, a series created when it first occurs.
func TestReplyKindSeries(t *testing.T) {
	m, reg := newRegistry(t)
	m.Observe(core.Event{Kind: core.EventDecision, Policy: "p", Decision: core.Decision{Degraded: true}, Err: fmt.Errorf("redisstore: %w", replyKindErr("oom"))})
	m.Observe(core.Event{Kind: core.EventDecision, Policy: "p", Decision: core.Decision{Degraded: true}, Err: replyKindErr("oom")})
	m.Observe(core.Event{Kind: core.EventDecision, Policy: "p", Decision: core.Decision{Degraded: true}, Err: replyKindErr("tryagain")})
	got := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "limitkit_store_errors_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "kind" {
					got[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, map[string]float64{"timeout": 0, "connection": 0, "circuit_open": 0, "canceled": 0, "other": 0, "oom": 2, "tryagain": 1}, got)
}
