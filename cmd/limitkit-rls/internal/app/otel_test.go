package app

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// collector is an OTLP/gRPC metrics receiver that keeps the sum of each
// limitkit.decisions data point by its attributes.
type collector struct {
	colmetricspb.UnimplementedMetricsServiceServer
	mu  sync.Mutex
	sum map[string]int64 // "policy=…,result=…" → the last cumulative value
}

func (c *collector) Export(_ context.Context, r *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range r.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "limitkit.decisions" {
					continue
				}
				for _, dp := range m.GetSum().GetDataPoints() {
					c.sum[attrs(dp)] = dp.GetAsInt()
				}
			}
		}
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

func attrs(dp *metricspb.NumberDataPoint) string {
	var parts []string
	for _, kv := range dp.Attributes {
		parts = append(parts, kv.Key+"="+kv.Value.GetStringValue())
	}
	return strings.Join(parts, ",")
}

// TestOTelOTLP: with -otel otlp the decisions reach an OTLP/gRPC collector
// named by OTEL_EXPORTER_OTLP_ENDPOINT, by policy and result, the last of
// them exported when the server stops.
func TestOTelOTLP(t *testing.T) {
	col := &collector{sum: map[string]int64{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	colmetricspb.RegisterMetricsServiceServer(gs, col)
	go gs.Serve(ln)
	defer gs.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())

	dir := t.TempDir()
	writeConfig(t, dir, `
domain: otel
descriptors:
  - key: k
    rate_limit: {unit: year, requests_per_unit: 3}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-addr", "127.0.0.1:0", "-metrics-addr", "", "-config", dir, "-otel", "otlp"}, nil,
			slog.New(slog.NewTextHandler(&syncBuf{}, nil)), func(g, _ string) { addrs <- g })
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("limitkit-rls did not start: %v", err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	for range 5 {
		_, err := client.ShouldRateLimit(context.Background(), req("otel", "k", "a"))
		require.NoError(t, err)
	}
	cancel()
	require.NoError(t, <-done)

	col.mu.Lock()
	defer col.mu.Unlock()
	require.Equal(t, map[string]int64{
		"limitkit.policy=rls:otel.k,limitkit.result=allowed": 3,
		"limitkit.policy=rls:otel.k,limitkit.result=denied":  2,
	}, col.sum)
}

// TestOTelStdoutAndBadMode: -otel stdout prints limitkit.decisions at
// shutdown; an unknown mode is refused.
func TestOTelStdoutAndBadMode(t *testing.T) {
	var out bytes.Buffer
	o, stop, err := setupOTel(context.Background(), otelStdout, &out)
	require.NoError(t, err)
	var prom int
	obs := fanOut(core.ObserverFunc(func(core.Event) { prom++ }), o)
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	l, err := core.NewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(obs))
	require.NoError(t, err)
	l.Allow(context.Background(), "k")
	l.Allow(context.Background(), "k")
	require.NoError(t, stop())
	require.Equal(t, 2, prom, "the first observer missed events")
	require.Contains(t, out.String(), `"limitkit.decisions"`)

	_, _, err = setupOTel(context.Background(), "jaeger", &out)
	require.ErrorContains(t, err, `-otel "jaeger"`)
	_, err = ParseFlags([]string{"-config", "x", "-otel", "jaeger"}, os.Stderr)
	require.ErrorContains(t, err, `-otel "jaeger": want stdout, otlp or nothing`)

	o, stop, err = setupOTel(context.Background(), "", &out)
	require.NoError(t, err)
	require.Nil(t, o)
	require.NoError(t, stop())
}
