package otellimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/otellimit"
)

type failingStore struct{ err error }

func (s failingStore) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	time.Sleep(time.Microsecond) // the Limiter times stores that do I/O
	return core.Decision{}, s.err
}

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
			k += string(kv.Key) + "=" + kv.Value.Emit() + ","
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
	f := core.MustNewLimiter(failingStore{context.DeadlineExceeded}, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(3)}}, core.WithObserver(o))
	_, _ = f.Allow(ctx, "k") // degraded, timeout
	o.Observe(core.Event{Kind: core.EventBreaker, Policy: "api", To: core.BreakerOpen})
	o.Observe(core.Event{Kind: core.EventSync, Err: context.DeadlineExceeded})
	o.Observe(core.Event{Kind: core.EventSync})

	got := points(t, reader)
	assert.Equal(t, map[string]float64{
		"limitkit.policy=api,limitkit.result=allowed,":  3,
		"limitkit.policy=api,limitkit.result=denied,":   2,
		"limitkit.policy=api,limitkit.result=degraded,": 1,
		"limitkit.policy=el,limitkit.result=allowed,":   1,
		"limitkit.policy=el,limitkit.result=elastic,":   1,
	}, got["limitkit.decisions"])
	assert.Equal(t, map[string]float64{"error.type=timeout,limitkit.policy=api,": 1}, got["limitkit.store.errors"])
	assert.Equal(t, map[string]float64{"limitkit.policy=api,": 1}, got["limitkit.store.duration"])
	assert.Equal(t, map[string]float64{"limitkit.policy=api,": 1}, got["limitkit.breaker.state"])
	assert.Equal(t, map[string]float64{"limitkit.sync.result=ok,": 1, "error.type=timeout,limitkit.sync.result=error,": 1}, got["limitkit.syncs"])
	assert.Equal(t, map[string]float64{
		"limitkit.limit.index=0,limitkit.limit.window=60,limitkit.policy=api,":   3,
		"limitkit.limit.index=1,limitkit.limit.window=3600,limitkit.policy=api,": 100,
	}, got["limitkit.limit"])
}

// A decision shows as an event on the request's span, without the key.
func TestRecordDecisionOnSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	o, err := otellimit.New(otellimit.WithTracerProvider(tp))
	require.NoError(t, err)
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	l := core.MustNewLimiter(st, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(o))
	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /")
	for range 2 {
		d, err := l.Allow(ctx, "user@example.com")
		require.NoError(t, err)
		o.RecordDecision(ctx, d)
	}
	span.End()
	o.RecordDecision(context.Background(), core.Decision{}) // no span: nothing, no panic
	spans := rec.Ended()
	require.Len(t, spans, 1)
	ev := spans[0].Events()
	require.Len(t, ev, 2)
	results := []string{}
	for _, e := range ev {
		assert.Equal(t, "limitkit.decision", e.Name)
		for _, kv := range e.Attributes {
			assert.NotContains(t, kv.Value.Emit(), "user@example.com")
			if kv.Key == "limitkit.result" {
				results = append(results, kv.Value.AsString())
			}
		}
	}
	assert.Equal(t, []string{"allowed", "denied"}, results)
}

func TestNewRejectsNilOption(t *testing.T) {
	_, err := otellimit.New(nil)
	require.Error(t, err)
}

func BenchmarkDecision(b *testing.B) {
	for _, mode := range []string{"none", "otel"} {
		b.Run(mode, func(b *testing.B) {
			st, err := memstore.New()
			require.NoError(b, err)
			defer st.Close()
			var opts []core.Option
			if mode == "otel" {
				o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
				require.NoError(b, err)
				opts = append(opts, core.WithObserver(o))
			}
			l := core.MustNewLimiter(st, core.Policy{Name: "api", Limits: []core.Limit{core.PerSecond(100_000)}}, opts...)
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = fmt.Sprint("client-", i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Allow(ctx, keys[i&1023]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The request path's events allocate nothing once a policy has been seen,
// with a real SDK behind the instruments.
func TestObserveDoesNotAllocate(t *testing.T) {
	o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	require.NoError(t, err)
	for _, e := range []core.Event{
		{Kind: core.EventDecision, Policy: "api", Outcome: core.OutcomeAllowed},
		{Kind: core.EventDecision, Policy: "api", Outcome: core.OutcomeAllowed, Decision: core.Decision{Elastic: true}},
		{Kind: core.EventDecision, Policy: "api", Outcome: core.OutcomeDenied, Latency: time.Millisecond},
		{Kind: core.EventDecision, Policy: "api", Outcome: core.OutcomeDegraded, Err: context.DeadlineExceeded},
		{Kind: core.EventDenyCacheHit, Policy: "api", Outcome: core.OutcomeDenied},
		{Kind: core.EventSync, Keys: 3},
	} {
		o.Observe(e) // first sight creates the policy's attributes
		assert.Zero(t, testing.AllocsPerRun(100, func() { o.Observe(e) }), e.Kind.String())
	}
}
