package exampleapp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

	"github.com/limitkit/limitkit/core"
)

// otelRules is one rule: anonymous callers, 5 requests a minute per IP.
func otelRules(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(file, []byte("version: 1\nrules:\n  - {name: anon, route: /*, identity: anonymous, key: ip, limits: [\"5 per 1m\"]}\n"), 0o600))
	return file
}

// sendTraffic sends allowed+denied GETs of one IP and checks each answer.
func sendTraffic(t *testing.T, do func(i int) int, allowed, denied int) {
	t.Helper()
	for i := range allowed + denied {
		want := http.StatusOK
		if i >= allowed {
			want = http.StatusTooManyRequests
		}
		require.Equal(t, want, do(i), "request %d", i)
	}
}

// With OpenTelemetry on, the example server's decision counts match the
// traffic sent, per result, and each request's span carries its
// decision; a traceparent header continues the caller's trace.
func TestOTelCountsMatchTraffic(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	rec := tracetest.NewSpanRecorder()
	clock := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	app, err := New(Config{RulesFile: otelRules(t), JWTSecret: "s"}, WithClock(clock),
		WithOTelProviders(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	require.NoError(t, err)
	defer app.Close()
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	const allowed, denied = 5, 3
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	sendTraffic(t, func(i int) int {
		r := httptest.NewRequest("GET", fmt.Sprintf("/api%d", i%3+1), nil)
		r.RemoteAddr = "198.51.100.7:40000"
		if i == allowed { // the first denied request continues a caller's trace
			r.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}, allowed, denied)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+attrString(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+attrString(p.Attributes)] = p.Value
				}
			}
		}
	}
	assert.Equal(t, map[string]int64{
		"limitkit.decisions{limitkit.policy=anon,limitkit.result=allowed}":                     allowed,
		"limitkit.decisions{limitkit.policy=anon,limitkit.result=denied}":                      denied,
		"limitkit.limit{limitkit.limit.index=0,limitkit.limit.window=60,limitkit.policy=anon}": 5,
	}, got)

	spans := rec.Ended()
	require.Len(t, spans, allowed+denied, "one server span per request")
	for i, s := range spans {
		assert.Equal(t, fmt.Sprintf("GET /api%d", i%3+1), s.Name(), "named by the route the mux matched")
		require.Len(t, s.Events(), 1, "span %d", i)
		e := s.Events()[0]
		assert.Equal(t, "limitkit.decision", e.Name)
		want := "allowed"
		if i >= allowed {
			want = "denied"
		}
		assert.Contains(t, e.Attributes, attribute.String("limitkit.result", want), "span %d", i)
		assert.Contains(t, e.Attributes, attribute.String("limitkit.policy", "anon"), "span %d", i)
		for _, kv := range e.Attributes {
			assert.NotContains(t, kv.Value.Emit(), "198.51.100.7", "the key (the client IP) is never recorded")
		}
	}
	assert.Equal(t, traceID, spans[allowed].SpanContext().TraceID().String(), "the caller's trace continues")
	assert.True(t, spans[allowed].Parent().IsRemote())
}

func attrString(s attribute.Set) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range s.ToSlice() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(kv.Key) + "=" + kv.Value.Emit())
	}
	b.WriteByte('}')
	return b.String()
}

// stdoutLine is what the test reads of a line -otel stdout prints: a span
// (Name, SpanContext, Events) or the metrics (ScopeMetrics).
type stdoutLine struct {
	Name        string
	SpanContext struct{ TraceID string }
	Events      []struct {
		Name       string
		Attributes []stdoutAttr
	}
	ScopeMetrics []struct {
		Metrics []struct {
			Name string
			Data struct {
				DataPoints []struct {
					Attributes []stdoutAttr
					Value      float64
				}
			}
		}
	}
}

type stdoutAttr struct {
	Key   string
	Value struct{ Value any }
}

func attrsOf(as []stdoutAttr) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprint(a.Key, "=", a.Value.Value))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// The -otel stdout flag, as a user runs it: a real HTTP server, a stock
// client, and the JSON lines the exporters print, read back. The counts
// printed at close match the traffic, per result; each span printed holds
// its decision.
func TestOTelStdoutFlag(t *testing.T) {
	prevMP, prevTP, prevProp := otel.GetMeterProvider(), otel.GetTracerProvider(), otel.GetTextMapPropagator()
	defer func() { // -otel stdout installs its providers as the globals
		otel.SetMeterProvider(prevMP)
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	}()
	cfg, err := ParseFlags("test", []string{"-otel", "stdout", "-rules", otelRules(t), "-jwt-secret", "s"}, func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, OTelStdout, cfg.OTel)
	out := &syncBuffer{}
	app, err := New(cfg, WithOTelOutput(out))
	require.NoError(t, err)
	defer app.Close()
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	const allowed, denied = 5, 4
	sendTraffic(t, func(int) int {
		resp, err := http.Get(srv.URL + "/api1")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}, allowed, denied)
	require.NoError(t, app.Close()) // prints the metrics once more

	results := map[string]float64{}
	var spanResults []string
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l stdoutLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		for _, e := range l.Events {
			if e.Name == "limitkit.decision" {
				spanResults = append(spanResults, attrsOf(e.Attributes))
			}
		}
		for _, sm := range l.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "limitkit.decisions" {
					for _, p := range m.Data.DataPoints {
						results[attrsOf(p.Attributes)] = p.Value // the last print wins: cumulative
					}
				}
			}
		}
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, map[string]float64{
		"{limitkit.policy=anon,limitkit.result=allowed}": allowed,
		"{limitkit.policy=anon,limitkit.result=denied}":  denied,
	}, results, out.String())
	require.Len(t, spanResults, allowed+denied, "one span with a decision per request")
	for i, s := range spanResults {
		want := "limitkit.result=allowed"
		if i >= allowed {
			want = "limitkit.result=denied"
		}
		assert.Contains(t, s, want, "span %d", i)
	}
	_, err = ParseFlags("test", []string{"-otel", "otlp"}, func(string) string { return "" })
	assert.ErrorContains(t, err, `-otel "otlp": want "stdout" or nothing`)
}
