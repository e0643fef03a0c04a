package exampleapp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/limitkit/limitkit/core"
)

// TestSpanName: a span's name, http.request.method and http.route come
// from the route template and a standard method (OTel HTTP semantic
// conventions), never from the raw path or an invented method.
func TestSpanName(t *testing.T) {
	for _, c := range []struct{ method, route, name, spanMethod, spanRoute string }{
		{"GET", "GET /api1", "GET /api1", "GET", "/api1"},
		{"GET", "/users/:id", "GET /users/:id", "GET", "/users/:id"},
		{"POST", "example.com/login", "POST /login", "POST", "/login"},
		{"GET", "", "GET", "GET", ""},                     // no route matched: no path
		{"FOO", "/api1", "HTTP /api1", "_OTHER", "/api1"}, // invented method
		{"get", "", "HTTP", "_OTHER", ""},                 // methods are case-sensitive
		{"PATCH", "/x", "PATCH /x", "PATCH", "/x"},
	} {
		name, m, r := spanName(c.method, c.route)
		assert.Equal(t, []string{c.name, c.spanMethod, c.spanRoute}, []string{name, m, r}, "%q %q", c.method, c.route)
	}
}

// TestSpanNamesBoundedByRoutes: requests with paths and methods a client
// invents (a thousand of each) through the example server with -otel
// make no more distinct span names and http.route values than the
// server has routes, and none holds what the client sent.
func TestSpanNamesBoundedByRoutes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	clock := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	app, err := New(Config{RulesFile: otelRules(t), JWTSecret: "s"}, WithClock(clock),
		WithOTelProviders(sdkmetric.NewMeterProvider(), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	require.NoError(t, err)
	defer app.Close()
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	const n = 1000
	for i := range n {
		for _, r := range []*http.Request{
			httptest.NewRequest("GET", fmt.Sprintf("/invented-%d", i), nil),
			httptest.NewRequest(fmt.Sprintf("INVENTED%d", i), "/api1", nil),
			httptest.NewRequest(fmt.Sprintf("INVENTED%d", i), fmt.Sprintf("/invented-%d", i), nil),
		} {
			r.RemoteAddr = fmt.Sprintf("198.51.100.%d:40000", i%250)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	spans := rec.Ended()
	require.Len(t, spans, 3*n, "one server span per request")
	names, routes := map[string]bool{}, map[string]bool{}
	for _, s := range spans {
		names[s.Name()] = true
		for _, a := range s.Attributes() {
			switch a.Key {
			case "http.route":
				routes[a.Value.AsString()] = true
			case "http.request.method":
				assert.Contains(t, []string{"GET", "_OTHER"}, a.Value.AsString())
			}
		}
		assert.NotContains(t, s.Name(), "invented", "the raw path is not a span name")
		assert.NotContains(t, s.Name(), "INVENTED", "an invented method is not a span name")
	}
	t.Logf("span names %v, routes %v", names, routes)
	assert.LessOrEqual(t, len(names), 2*len(Endpoints)+2, "span names bounded by the routes")
	assert.LessOrEqual(t, len(routes), len(Endpoints)+1, "http.route bounded by the routes")
	for r := range routes {
		assert.False(t, strings.Contains(r, "invented"), "http.route %q", r)
	}
}
