package exampleapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/otellimit"
)

// OTelStdout is the -otel mode that prints OpenTelemetry metrics and
// spans to standard output as JSON, one object a line.
const OTelStdout = "stdout"

// OTelInterval is how often -otel stdout prints the metrics (and once
// more when the app closes).
const OTelInterval = 10 * time.Second

// TracerName is the instrumentation scope of the example's request spans.
const TracerName = "github.com/limitkit/limitkit/_examples/exampleapp"

// WithOTelOutput makes -otel stdout write to w instead of os.Stdout
// (tests). w must be safe for concurrent use: the metrics and the spans
// are written from different goroutines.
func WithOTelOutput(w io.Writer) Option { return func(o *options) { o.otelOut = w } }

// WithOTelProviders turns OpenTelemetry on with in-process providers (an
// SDK MeterProvider with a ManualReader, a TracerProvider with a span
// recorder) instead of what -otel says. The caller keeps ownership of
// them.
func WithOTelProviders(mp metric.MeterProvider, tp trace.TracerProvider) Option {
	return func(o *options) { o.mp, o.tp = mp, tp }
}

// setupOTel sets a.OTel and a.tracer when OpenTelemetry is on: with the
// providers WithOTelProviders gave, or for -otel stdout, SDK providers
// with the stdout exporters, installed as the global ones (which
// otellimit.New defaults to, as every OTel instrumentation does).
func (a *App) setupOTel(cfg Config, o *options) error {
	mp, tp := o.mp, o.tp
	var opts []otellimit.Option
	switch {
	case mp != nil || tp != nil:
		if mp == nil || tp == nil {
			return errors.New("exampleapp: WithOTelProviders needs both providers")
		}
		opts = append(opts, otellimit.WithMeterProvider(mp), otellimit.WithTracerProvider(tp))
	case cfg.OTel == OTelStdout:
		w := o.otelOut
		if w == nil {
			w = os.Stdout
		}
		mexp, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
		if err != nil {
			return err
		}
		texp, err := stdouttrace.New(stdouttrace.WithWriter(w))
		if err != nil {
			return err
		}
		smp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(OTelInterval))))
		stp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp)) // each span printed as it ends
		a.closers = append(a.closers, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return errors.Join(stp.Shutdown(ctx), smp.Shutdown(ctx)) // the last metrics are printed
		})
		otel.SetMeterProvider(smp)
		otel.SetTracerProvider(stp)
		otel.SetTextMapPropagator(propagation.TraceContext{})
		mp, tp = smp, stp
	case cfg.OTel != "":
		return fmt.Errorf("-otel %q: want %q or nothing", cfg.OTel, OTelStdout)
	default:
		return nil
	}
	var err error
	if a.OTel, err = otellimit.New(opts...); err != nil {
		return err
	}
	a.tracer = tp.Tracer(TracerName)
	return nil
}

// observer is what the limiters report to: the Prometheus metrics, and
// the OpenTelemetry observer too when it is on.
func (a *App) observer() core.Observer {
	if a.OTel == nil {
		return a.Metrics
	}
	m, o := a.Metrics, a.OTel
	return core.ObserverFunc(func(e core.Event) {
		m.Observe(e)
		o.Observe(e)
	})
}

// StartSpan starts a request's server span when OpenTelemetry is on (-otel,
// [WithOTelProviders]), so that the limiter's decision shows on it as a
// limitkit.decision event, continuing the caller's trace when header (a
// request header getter) has a W3C traceparent. It returns the context
// holding the span and the function that ends it; with OpenTelemetry off,
// ctx and a no-op. An application would use its framework's OTel
// middleware (otelhttp.NewHandler, ...) instead; this keeps the examples
// free of the contrib modules.
//
// The span's name and attributes follow the OpenTelemetry HTTP semantic
// conventions, from what the server chose, never from what the client
// sent: the name is "{method} {route}", route the template the framework
// matched (in the path form of [RoutePath]; "" when none matched, and
// then the name is the method alone and the span has no http.route), and
// a method outside the standard set (GET, HEAD, POST, PUT, DELETE,
// CONNECT, OPTIONS, TRACE, PATCH, case-sensitive) is "_OTHER" in
// http.request.method and "HTTP" in the name. So the raw path and an
// invented method never reach a span's name: a client cannot grow the
// number of distinct span names (nor the cardinality of a backend that
// aggregates by them).
func (a *App) StartSpan(ctx context.Context, method, route string, header func(string) string) (context.Context, func()) {
	if a.tracer == nil {
		return ctx, func() {}
	}
	ctx = propagation.TraceContext{}.Extract(ctx, headerCarrier(header))
	name, method, route := spanName(method, route)
	attrs := []attribute.KeyValue{attribute.String("http.request.method", method)}
	if route != "" {
		attrs = append(attrs, attribute.String("http.route", route))
	}
	ctx, span := a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, func() { span.End() }
}

// spanName returns a server span's name, its http.request.method and its
// http.route (see [App.StartSpan]) for a request's method and the route
// template its framework matched ("" when none did).
func spanName(method, route string) (name, spanMethod, spanRoute string) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch:
		name = method
	default:
		method, name = "_OTHER", "HTTP"
	}
	if route != "" {
		route = RoutePath(route, "")
	}
	if route != "" {
		name += " " + route
	}
	return name, method, route
}

// headerCarrier reads a request's headers for propagation.
type headerCarrier func(string) string

func (h headerCarrier) Get(key string) string { return h(key) }
func (headerCarrier) Set(string, string)      {}
func (headerCarrier) Keys() []string          { return nil }
