package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/limitkit/limitkit/internal/redistest"
)

const loadConfig = `domain: load
descriptors:
  - key: ip
    rate_limit: {unit: year, requests_per_unit: 2000000000}
`

// redisCPU is the server's used_cpu_sys + used_cpu_user, in seconds.
func redisCPU(t *testing.T, s *redistest.Server) float64 {
	out, err := s.Do("INFO", "cpu")
	require.NoError(t, err)
	var sum float64
	for _, l := range strings.Split(out, "\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return sum
}

// drive sends requests from 64 goroutines for d and returns decisions/s.
func drive(t *testing.T, c pb.RateLimitServiceClient, d time.Duration) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req("load", "ip", "g"+strconv.Itoa(g))
			for ctx.Err() == nil {
				if _, err := c.ShouldRateLimit(ctx, r); err == nil {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// TestSideBySideThroughput measures decisions per second and Redis CPU per
// decision at 64 concurrent callers for envoyproxy/ratelimit (pipeline
// window 0 and 150µs) and limitkit-rls (exact, pipelined, fleet tier).
// It asserts nothing about speed; it logs the figures. Skipped without
// LIMITKIT_RLS_REFERENCE and LIMITKIT_RLS_SIDE_BY_SIDE=1.
func TestSideBySideThroughput(t *testing.T) {
	bin := os.Getenv(ReferenceEnv)
	if bin == "" || os.Getenv("LIMITKIT_RLS_SIDE_BY_SIDE") != "1" {
		t.Skipf("set %s and LIMITKIT_RLS_SIDE_BY_SIDE=1 to measure", ReferenceEnv)
	}
	const d = 5 * time.Second
	run := func(name string, s *redistest.Server, c pb.RateLimitServiceClient) {
		drive(t, c, time.Second) // warm up
		cpu0 := redisCPU(t, s)
		rate := drive(t, c, d)
		cpu := redisCPU(t, s) - cpu0
		t.Logf("%-34s %9.0f decisions/s  %6.2f µs Redis CPU/decision", name, rate, cpu/(rate*d.Seconds())*1e6)
	}
	for _, window := range []string{"0", "150us"} {
		s := redistest.StartNode(t)
		root := t.TempDir()
		dir := filepath.Join(root, "rl", "config")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "load.yaml"), []byte(loadConfig), 0o600))
		port := freePort(t)
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "USE_STATSD=false", "LOG_LEVEL=error", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+s.Addr,
			"REDIS_PIPELINE_WINDOW="+window, "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=rl",
			"HOST=127.0.0.1", "PORT="+strconv.Itoa(freePort(t)), "DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(freePort(t)),
			"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(port))
		require.NoError(t, cmd.Start())
		conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		c := pb.NewRateLimitServiceClient(conn)
		eventually(t, func() bool {
			_, err := c.ShouldRateLimit(context.Background(), req("load", "ip", "x"))
			return err == nil
		}, "reference did not start")
		run("envoyproxy/ratelimit window="+window, s, c)
		conn.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	for _, extra := range [][]string{nil, {"-redis-pipeline"}, {"-sync", "100ms"}} {
		s := redistest.StartNode(t)
		dir := t.TempDir()
		writeConfig(t, dir, loadConfig)
		r := start(t, append([]string{"-config", dir, "-redis", s.Addr, "-headers=false", "-store-timeout", "1s"}, extra...)...)
		run(fmt.Sprintf("limitkit-rls %v", extra), s, r.client)
	}
}
