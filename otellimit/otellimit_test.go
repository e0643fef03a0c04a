package otellimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/metrics"
	"github.com/limitkit/limitkit/otellimit"
)

type failingStore struct{ err error }

func (s failingStore) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	time.Sleep(time.Microsecond) // the Limiter times stores that do I/O
	return core.Decision{}, s.err
}

// localFallback fails and decides by a local fallback, as the fleet tier
// does under FailLocal: the decision carries the divided limit.
type localFallback struct{}

func (localFallback) Take(_ context.Context, _ string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	time.Sleep(time.Microsecond)
	return core.Decision{Policy: p.Name, Allowed: true, Degraded: true, Limit: core.PerMinute(1), Remaining: 0}, io.EOF
}
func (localFallback) FallsBackLocally() bool { return true }

type roomSignal struct{}

func (roomSignal) Acquire(context.Context, int64) (bool, error) { return true, nil }

// points collects reader and returns each instrument's data points as
// "attr=value,..." → value (sums and gauges) or count (histograms).
func points(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]map[string]float64{}
	key := func(s attribute.Set) string {
		k := ""
		for _, kv := range s.ToSlice() {
			k += string(kv.Key) + "=" + kv.Value.String() + ","
		}
		return k
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			pts := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Count)
				}
			}
			out[m.Name] = pts
		}
	}
	return out
}

// Decision counts per result match the traffic sent through real limiters.
func TestDecisionsMatchTraffic(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	ctx := context.Background()
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	api := core.Policy{Name: "api", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(3), core.PerHour(100)}}
	l := core.MustNewLimiter(st, api, core.WithObserver(o), core.WithClock(clk))
	o.WatchPolicy(*l.Policy())
	for range 5 { // 3 allowed, 2 denied
		_, err := l.Allow(ctx, "k")
		require.NoError(t, err)
	}
	el := core.MustNewLimiter(st, core.Policy{Name: "el", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(1)},
		Elastic: &core.Elastic{CeilingPercent: 200, Signal: roomSignal{}}}, core.WithObserver(o), core.WithClock(clk))
	for range 2 { // 1 allowed, 1 elastic
		_, _ = el.Allow(ctx, "k")
	}
	sh := core.MustNewLimiter(st, core.Policy{Name: "sh", Shadow: true, Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(o), core.WithClock(clk))
	for range 2 { // 1 allowed, 1 shadowed
		_, _ = sh.Allow(ctx, "k")
	}
	f := core.MustNewLimiter(failingStore{context.DeadlineExceeded}, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(3)}}, core.WithObserver(o))
	_, _ = f.Allow(ctx, "k") // degraded by fail mode open, timeout
	fc := core.MustNewLimiter(failingStore{errors.New("boom")}, core.Policy{Name: "api", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(3)}}, core.WithObserver(o))
	_, _ = fc.Allow(ctx, "k") // degraded by fail mode closed, other
	fl := core.MustNewLimiter(localFallback{}, core.Policy{Name: "api", FailMode: core.FailLocal, Limits: []core.Limit{core.PerMinute(3)}}, core.WithObserver(o))
	_, _ = fl.Allow(ctx, "k") // degraded by fail mode local, connection
	// not decisions: counted nowhere
	_, _ = l.PeekN(ctx, "k", 1)
	_, _ = l.AllowN(ctx, "k", 0)
	_, _ = l.Charge(ctx, "k", 1)
	_, _ = l.Refund(ctx, "k", 1)
	require.NoError(t, l.Reset(ctx, "k"))
	// the fleet tier's own events
	o.Observe(core.Event{Kind: core.EventDenyCacheHit, Policy: "api"})
	o.Observe(core.Event{Kind: core.EventFallback, Policy: "api", Decision: core.Decision{Allowed: true}})
	o.Observe(core.Event{Kind: core.EventBreaker, Policy: "api", To: "open"})
	o.Observe(core.Event{Kind: core.EventSync, Err: context.DeadlineExceeded})
	o.Observe(core.Event{Kind: core.EventSync})

	got := points(t, reader)
	assert.Equal(t, map[string]float64{
		"limitkit.policy=api,limitkit.result=allowed,":                            3,
		"limitkit.policy=api,limitkit.result=denied,":                             2,
		"limitkit.fail_mode=open,limitkit.policy=api,limitkit.result=degraded,":   1,
		"limitkit.fail_mode=closed,limitkit.policy=api,limitkit.result=degraded,": 1,
		"limitkit.fail_mode=local,limitkit.policy=api,limitkit.result=degraded,":  1,
		"limitkit.policy=el,limitkit.result=allowed,":                             1,
		"limitkit.policy=el,limitkit.result=elastic,":                             1,
		"limitkit.policy=sh,limitkit.result=allowed,":                             1,
		"limitkit.policy=sh,limitkit.result=shadowed,":                            1,
	}, got["limitkit.decisions"])
	assert.Equal(t, map[string]float64{"error.type=timeout,limitkit.policy=api,": 1, "error.type=other,limitkit.policy=api,": 1,
		"error.type=connection,limitkit.policy=api,": 1}, got["limitkit.store.errors"])
	assert.Equal(t, map[string]float64{"limitkit.policy=api,": 3}, got["limitkit.store.duration"])
	assert.Equal(t, map[string]float64{"limitkit.policy=api,": 1}, got["limitkit.deny_cache.hits"])
	assert.Equal(t, map[string]float64{"limitkit.policy=api,": 1}, got["limitkit.fallbacks"])
	assert.Equal(t, map[string]float64{"limitkit.policy=api,": 1}, got["limitkit.breaker.state"])
	assert.Equal(t, map[string]float64{"limitkit.sync.result=ok,": 1, "error.type=timeout,limitkit.sync.result=error,": 1}, got["limitkit.syncs"])
	assert.Equal(t, map[string]float64{
		"limitkit.limit.index=0,limitkit.limit.window=60,limitkit.policy=api,":   3,
		"limitkit.limit.index=1,limitkit.limit.window=3600,limitkit.policy=api,": 100,
	}, got["limitkit.limit"])
}

// spanEvents returns the names of the span's events and each event's
// attributes, checking that no attribute holds key.
func spanEvents(t *testing.T, span sdktrace.ReadOnlySpan, key string) ([]string, []map[string]string) {
	t.Helper()
	var names []string
	var attrs []map[string]string
	for _, e := range span.Events() {
		names = append(names, e.Name)
		m := map[string]string{}
		for _, kv := range e.Attributes {
			assert.NotContains(t, kv.Value.String(), key, "an event attribute holds the key")
			m[string(kv.Key)] = kv.Value.String()
		}
		attrs = append(attrs, m)
	}
	return names, attrs
}

// Each event of a request shows on the request's span, found in the
// event's context with nothing done in the request path, and never with
// the key.
func TestSpanEventsFromTheEventsContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	o, err := otellimit.New(otellimit.WithTracerProvider(tp), otellimit.WithMeterProvider(sdkmetric.NewMeterProvider()))
	require.NoError(t, err)
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	const key = "user@example.com"
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l := core.MustNewLimiter(st, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(o), core.WithClock(clk))
	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /")
	for range 2 {
		_, err := l.Allow(ctx, key)
		require.NoError(t, err)
	}
	_, _ = l.PeekN(ctx, key, 1)
	_, _ = l.Refund(ctx, key, 1)
	_, _ = l.Charge(ctx, key, 1)
	require.NoError(t, l.Reset(ctx, key))
	f := core.MustNewLimiter(failingStore{context.DeadlineExceeded}, core.Policy{Name: "api", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(3)}}, core.WithObserver(o))
	_, _ = f.Allow(ctx, key)
	o.Observe(core.Event{Kind: core.EventDenyCacheHit, Context: ctx, Policy: "api",
		Decision: core.Decision{Policy: "api", RetryAfter: time.Second}})
	span.End()
	_, _ = l.Allow(context.Background(), key) // no span: nothing, no panic
	spans := rec.Ended()
	require.Len(t, spans, 1)
	names, attrs := spanEvents(t, spans[0], key)
	assert.Equal(t, []string{"limitkit.decision", "limitkit.decision", "limitkit.peek", "limitkit.refund", "limitkit.charge",
		"limitkit.reset", "limitkit.decision", "limitkit.deny_cache_hit"}, names)
	require.Len(t, attrs, 8)
	assert.Equal(t, map[string]string{"limitkit.policy": "api", "limitkit.result": "allowed", "limitkit.remaining": "0", "limitkit.retry_after": "0"}, attrs[0])
	assert.Equal(t, map[string]string{"limitkit.policy": "api", "limitkit.result": "denied", "limitkit.remaining": "0", "limitkit.retry_after": "60"}, attrs[1])
	assert.Equal(t, "denied", attrs[2]["limitkit.result"], "the exhausted key peeks denied")
	assert.Equal(t, "allowed", attrs[3]["limitkit.result"], "the refund left room")
	assert.Equal(t, map[string]string{"limitkit.policy": "api"}, attrs[5], "a reset reports no decision")
	assert.Equal(t, map[string]string{"limitkit.policy": "api", "limitkit.result": "degraded", "limitkit.fail_mode": "closed",
		"limitkit.remaining": "0", "limitkit.retry_after": "1", "error.type": "timeout"}, attrs[6])
	assert.Equal(t, "denied", attrs[7]["limitkit.result"])
}

// A span that is not sampled gets nothing; WithoutSpanEvents turns the
// events off.
func TestSpanEventsOptOut(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	quiet, err := otellimit.New(otellimit.WithoutSpanEvents(), otellimit.WithMeterProvider(sdkmetric.NewMeterProvider()))
	require.NoError(t, err)
	l := core.MustNewLimiter(st, core.Policy{Name: "q", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(quiet))
	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /")
	_, _ = l.Allow(ctx, "k")
	span.End()
	names, _ := spanEvents(t, rec.Ended()[0], "k")
	assert.Empty(t, names, "WithoutSpanEvents")

	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(rec))
	o, err := otellimit.New(otellimit.WithTracerProvider(never), otellimit.WithMeterProvider(sdkmetric.NewMeterProvider()))
	require.NoError(t, err)
	l2 := core.MustNewLimiter(st, core.Policy{Name: "n", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(o))
	ctx, span = never.Tracer("test").Start(context.Background(), "GET /")
	_, _ = l2.Allow(ctx, "k")
	span.End()
	assert.Len(t, rec.Ended(), 1, "an unsampled span records nothing")
}

// HashedKey is the opt-in: stable for a key and secret, different across
// keys and secrets, and not the key.
func TestHashedKey(t *testing.T) {
	secret := []byte("deployment secret")
	a := otellimit.HashedKey(secret, "203.0.113.7")
	assert.Equal(t, attribute.Key("limitkit.key.hash"), a.Key)
	assert.Equal(t, a, otellimit.HashedKey(secret, "203.0.113.7"))
	assert.NotEqual(t, a, otellimit.HashedKey(secret, "203.0.113.8"))
	assert.NotEqual(t, a, otellimit.HashedKey([]byte("other"), "203.0.113.7"))
	assert.Len(t, a.Value.AsString(), 32)
	assert.NotContains(t, a.Value.AsString(), "203")
	// HMAC-SHA256, first 16 bytes: a reader can check it with any HMAC tool
	assert.Equal(t, "c5d4be1992d50d3b41f9a21292fc67a2", otellimit.HashedKey([]byte("k"), "v").Value.AsString())
}

func TestNewRejectsNilOption(t *testing.T) {
	_, err := otellimit.New(nil)
	require.Error(t, err)
}

// BenchmarkDecision is the cost per decision of each exporter against no
// observer, in one run: a Limiter over the embedded store with no
// observer, the Prometheus metrics package, and this package (the SDK's
// MeterProvider with a ManualReader), on a request context without a span
// and with a sampled span (which gets the span event). The "+span" modes
// start a span per 4 decisions (a request with a few checks), with and
// without the observer: their difference is the span events' cost.
func BenchmarkDecision(b *testing.B) {
	tracer := sdktrace.NewTracerProvider().Tracer("bench")
	for _, mode := range []string{"none", "prometheus", "otel", "none+span", "otel+span"} {
		b.Run(mode, func(b *testing.B) {
			st, err := memstore.New()
			require.NoError(b, err)
			defer st.Close()
			var opts []core.Option
			ctx := context.Background()
			switch mode {
			case "prometheus":
				opts = append(opts, core.WithObserver(metrics.MustNew()))
			case "otel", "otel+span":
				o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
				require.NoError(b, err)
				opts = append(opts, core.WithObserver(o))
			}
			spans := mode == "none+span" || mode == "otel+span"
			l := core.MustNewLimiter(st, core.Policy{Name: "api", Limits: []core.Limit{core.PerSecond(100_000)}}, opts...)
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = fmt.Sprint("client-", i)
			}
			var span trace.Span
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if spans && i&3 == 0 {
					if span != nil {
						span.End()
					}
					ctx, span = tracer.Start(context.Background(), "GET /")
				}
				if _, err := l.Allow(ctx, keys[i&1023]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The request path's events allocate nothing once a policy has been seen,
// with a real SDK behind the instruments, when the request is not traced:
// no context, no span, or a span that is not sampled.
func TestObserveDoesNotAllocate(t *testing.T) {
	o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))),
		otellimit.WithTracerProvider(sdktrace.NewTracerProvider()))
	require.NoError(t, err)
	unsampled, span := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("t").Start(context.Background(), "GET /")
	defer span.End()
	for _, ctx := range []context.Context{nil, context.Background(), unsampled} {
		for _, e := range []core.Event{
			{Kind: core.EventDecision, Policy: "api", Decision: core.Decision{Allowed: true}},
			{Kind: core.EventDecision, Policy: "api", Decision: core.Decision{Allowed: true, Elastic: true}},
			{Kind: core.EventDecision, Policy: "api", Latency: time.Millisecond},
			{Kind: core.EventDecision, Policy: "api", Decision: core.Decision{Degraded: true}, Err: context.DeadlineExceeded},
			{Kind: core.EventDecision, Policy: "api", Decision: core.Decision{Degraded: true, Limit: core.PerMinute(1)}},
			{Kind: core.EventDecision, Policy: "api", Decision: core.Decision{Cached: true}},
			{Kind: core.EventVerb, Verb: "peek", Policy: "api", Decision: core.Decision{Allowed: true}},
			{Kind: core.EventVerb, Verb: "charge", Policy: "api"},
			{Kind: core.EventVerb, Verb: "reset", Policy: "api"},
			{Kind: core.EventDenyCacheHit, Policy: "api"},
			{Kind: core.EventSync, Keys: 3},
		} {
			e.Context = ctx
			o.Observe(e) // first sight creates the policy's attributes
			assert.Zero(t, testing.AllocsPerRun(100, func() { o.Observe(e) }), "%v, context %v", e.Kind, ctx)
		}
	}
}

// remote hides the embedded store's Local, so that a fleet tier takes it
// for a remote store.
type remote struct{ core.Store }

// Through a real fleet tier: a denial from the deny cache is counted as
// denied with limitkit.deny_cache, the remote's own denial without it,
// and both the tier's event and the decision show on the request's span.
func TestDenyCacheResult(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), otellimit.WithTracerProvider(tp))
	require.NoError(t, err)
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	tier, err := fleet.New(remote{st}, fleet.WithObserver(o))
	require.NoError(t, err)
	defer tier.Close()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l := core.MustNewLimiter(tier, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}}, core.WithObserver(o), core.WithClock(clk))
	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /")
	for range 5 { // 2 allowed, 1 denied by the remote store, 2 from the deny cache
		_, err := l.Allow(ctx, "k")
		require.NoError(t, err)
	}
	span.End()
	got := points(t, reader)
	assert.Equal(t, map[string]float64{
		"limitkit.policy=api,limitkit.result=allowed,":                         2,
		"limitkit.policy=api,limitkit.result=denied,":                          1,
		"limitkit.deny_cache=true,limitkit.policy=api,limitkit.result=denied,": 2,
	}, got["limitkit.decisions"])
	assert.Equal(t, map[string]float64{"limitkit.policy=api,": 2}, got["limitkit.deny_cache.hits"])
	names, attrs := spanEvents(t, rec.Ended()[0], "k")
	assert.Equal(t, []string{"limitkit.decision", "limitkit.decision", "limitkit.decision",
		"limitkit.deny_cache_hit", "limitkit.decision", "limitkit.deny_cache_hit", "limitkit.decision"}, names)
	assert.Equal(t, "true", attrs[4]["limitkit.deny_cache"])
	assert.Equal(t, "denied", attrs[4]["limitkit.result"])
	assert.NotContains(t, attrs[2], "limitkit.deny_cache")
}

// BenchmarkExporterOverhead is BenchmarkDecision interleaved: blocks of
// 512 decisions rotate between its five modes so that load from other
// processes falls on all alike, and each mode's median ns per decision
// over the blocks is reported ("none-ns", "prometheus-ns", "otel-ns",
// "none+span-ns", "otel+span-ns").
func BenchmarkExporterOverhead(b *testing.B) {
	modes := []string{"none", "prometheus", "otel", "none+span", "otel+span"}
	tracer := sdktrace.NewTracerProvider().Tracer("bench")
	lims := make([]*core.Limiter, len(modes))
	for i, mode := range modes {
		st, err := memstore.New()
		require.NoError(b, err)
		b.Cleanup(func() { st.Close() })
		var opts []core.Option
		switch mode {
		case "prometheus":
			opts = append(opts, core.WithObserver(metrics.MustNew()))
		case "otel", "otel+span":
			o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
			require.NoError(b, err)
			opts = append(opts, core.WithObserver(o))
		}
		lims[i] = core.MustNewLimiter(st, core.Policy{Name: "api", Limits: []core.Limit{core.PerSecond(100_000)}}, opts...)
	}
	keys := make([]string, 512)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	blocks := make([][]float64, len(modes))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		for w, mode := range modes {
			block := min(len(keys), b.N-done)
			if block <= 0 {
				break
			}
			spans := strings.HasSuffix(mode, "+span")
			ctx := context.Background()
			var span trace.Span
			start := time.Now()
			for i := 0; i < block; i++ {
				if spans && i&3 == 0 {
					if span != nil {
						span.End()
					}
					ctx, span = tracer.Start(context.Background(), "GET /")
				}
				if _, err := lims[w].Allow(ctx, keys[i]); err != nil {
					b.Fatal(err)
				}
			}
			if span != nil {
				span.End()
			}
			blocks[w] = append(blocks[w], float64(time.Since(start).Nanoseconds())/float64(block))
			done += block
		}
	}
	b.StopTimer()
	for w, mode := range modes {
		if len(blocks[w]) > 0 {
			slices.Sort(blocks[w])
			b.ReportMetric(blocks[w][len(blocks[w])/2], mode+"-ns")
		}
	}
}

// Without options, New records to the global MeterProvider (the OTel
// contrib convention), as it is when New is called.
func TestNewDefaultsToTheGlobalProviders(t *testing.T) {
	prevMP, prevTP := otel.GetMeterProvider(), otel.GetTracerProvider()
	defer func() { otel.SetMeterProvider(prevMP); otel.SetTracerProvider(prevTP) }()
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	o, err := otellimit.New()
	require.NoError(t, err)
	ctx, span := otel.Tracer("test").Start(context.Background(), "GET /")
	o.Observe(core.Event{Kind: core.EventDecision, Context: ctx, Policy: "g", Decision: core.Decision{Allowed: true}})
	span.End()
	assert.Equal(t, map[string]float64{"limitkit.policy=g,limitkit.result=allowed,": 1}, points(t, reader)["limitkit.decisions"])
	names, _ := spanEvents(t, rec.Ended()[0], "k")
	assert.Equal(t, []string{"limitkit.decision"}, names)
}

// TestPolicyCapIsExact: the first maxPolicies distinct policy names are
// recorded under their own limitkit.policy value, every later one under
// otherPolicy (the cap bounds the series exactly, not one beyond).
func TestPolicyCapIsExact(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	for i := range docMaxPolicies + 2 {
		o.Observe(core.Event{Kind: core.EventDecision, Policy: fmt.Sprintf("p%d", i), Decision: core.Decision{Allowed: true}})
	}
	got := points(t, reader)["limitkit.decisions"]
	own := func(i int) string { return fmt.Sprintf("limitkit.policy=p%d,limitkit.result=allowed,", i) }
	assert.Equal(t, 1.0, got[own(docMaxPolicies-1)], "the maxPolicies-th name is its own")
	assert.NotContains(t, got, own(docMaxPolicies), "the next one is not")
	assert.Equal(t, 2.0, got["limitkit.policy=other,limitkit.result=allowed,"], "the two beyond the cap")
	assert.Len(t, got, docMaxPolicies+1)
}

// docMaxPolicies is the policy cap New's documentation states.
const docMaxPolicies = 100
