package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/otellimit"
)

// The -otel modes.
const (
	otelStdout = "stdout" // metrics printed as JSON lines every otelStdoutEvery
	otelOTLP   = "otlp"   // metrics pushed over OTLP/gRPC, set up by the OTEL_* environment
)

// otelStdoutEvery is how often -otel stdout prints the metrics (and once
// more at shutdown).
const otelStdoutEvery = 10 * time.Second

// otelShutdown bounds the last export at shutdown.
const otelShutdown = 10 * time.Second

// setupOTel returns the otellimit observer for mode ("" : nil, off) and
// the function that flushes and stops its exporter. -otel stdout writes
// to w. -otel otlp reads the standard variables, as every OpenTelemetry
// SDK does: OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (default localhost:4317; an
// http:// endpoint is sent in plaintext), OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_CERTIFICATE and the rest, and
// OTEL_METRIC_EXPORT_INTERVAL (default 60000 ms). Nothing is dialled
// here: an unreachable collector costs failed exports (logged by the SDK),
// never a decision.
//
// An RLS call carries no span, so the observer records metrics only (the
// instruments of package otellimit: limitkit.decisions by policy and
// result, limitkit.store.duration, limitkit.store.errors, and the fleet
// tier's).
func setupOTel(ctx context.Context, mode string, w io.Writer) (*otellimit.Observer, func() error, error) {
	var exp sdkmetric.Exporter
	var ropts []sdkmetric.PeriodicReaderOption
	var err error
	switch mode {
	case "":
		return nil, func() error { return nil }, nil
	case otelStdout:
		exp, err = stdoutmetric.New(stdoutmetric.WithWriter(w))
		ropts = append(ropts, sdkmetric.WithInterval(otelStdoutEvery))
	case otelOTLP:
		exp, err = otlpmetricgrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("-otel %q: want %q, %q or nothing", mode, otelStdout, otelOTLP)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("-otel %s: %w", mode, err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, ropts...)))
	shutdown := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), otelShutdown)
		defer cancel()
		return mp.Shutdown(ctx) // the last metrics are exported
	}
	o, err := otellimit.New(otellimit.WithMeterProvider(mp), otellimit.WithoutSpanEvents())
	if err != nil {
		return nil, nil, errors.Join(err, shutdown())
	}
	return o, shutdown, nil
}

// fanOut reports each event to both observers; o nil: p alone.
func fanOut(p core.Observer, o *otellimit.Observer) core.Observer {
	if o == nil {
		return p
	}
	return core.ObserverFunc(func(e core.Event) {
		p.Observe(e)
		o.Observe(e)
	})
}
