// Command limitkit-rls is an Envoy rate limit service
// (envoy.service.ratelimit.v3.RateLimitService) backed by limitkit: point
// Envoy's envoy.filters.http.ratelimit filter (or Istio's, Envoy
// Gateway's, Contour's) at it, and -config at an envoyproxy/ratelimit
// configuration directory.
//
//	limitkit-rls -config /etc/ratelimit/config -redis redis://redis:6379
//
// Flags:
//
//	-addr          gRPC listen address (default :8081); serves grpc.health.v1 and reflection
//	-config        a configuration file, or a directory of *.yaml files (one domain each)
//	-redis         Redis: host:port or a redis:// URL (rediss://, a Cluster's seeds
//	               comma-separated, ?master_name= for Sentinel); empty: the embedded store
//	-sync          with -redis: the fleet tier's write-back interval (e.g. 100ms);
//	               0 = exact, every decision at Redis behind the deny cache and breaker
//	-redis-pipeline  with -redis: pipeline the decisions waiting for one node, no window
//	               (default true; -redis-pipeline=false: a round trip per decision)
//	-store-timeout deadline of one store call (default 50ms); past it the rule's fail mode decides
//	-metrics-addr  Prometheus /metrics and /healthz (default :9090; empty: off)
//	-headers       add X-Ratelimit-* and Retry-After to Envoy's responses (default true)
//	-watch         how often the configuration is checked for changes (default 1s; 0: only SIGHUP)
//	-allow-degraded  start even when Redis does not answer
//	-otel          also export the metrics to OpenTelemetry: stdout, or otlp (OTLP/gRPC,
//	               set up by the OTEL_EXPORTER_OTLP_* environment); empty: off
//
// GOGC, when unset, is 400 rather than Go's 100: the collector took a fifth
// to a third of the server's CPU under load at 100 (see docs/envoy.md);
// set GOGC=100 to trade that CPU for memory.
//
// The configuration is reloaded when its files change and on SIGHUP; a file
// that does not load is refused and logged, and the previous configuration
// keeps serving.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/limitkit/limitkit/cmd/limitkit-rls/internal/app"
)

func main() {
	app.TuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := app.Run(ctx, os.Args[1:], hup, log, nil)
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "limitkit-rls:", err)
		os.Exit(2)
	}
}
