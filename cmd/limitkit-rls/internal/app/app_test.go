package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/internal/redistest"
)

const sharedConfig = `
domain: shared
descriptors:
  - key: api_key
    rate_limit:
      unit: year
      requests_per_unit: 50
  - key: tenant
    rate_limit:
      unit: year
      requests_per_unit: 100000
`

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type running struct {
	client  pb.RateLimitServiceClient
	conn    *grpc.ClientConn
	hup     chan os.Signal
	log     *syncBuf
	metrics string // the -metrics-addr bound
}

// start runs the command with args (and -addr, -metrics-addr on free
// ports) and returns a gRPC client of it.
func start(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{hup: make(chan os.Signal, 1), log: &syncBuf{}}
	addrs := make(chan [2]string, 1)
	done := make(chan error, 1)
	args = append([]string{"-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0"}, args...)
	go func() {
		done <- Run(ctx, args, r.hup, slog.New(slog.NewTextHandler(r.log, nil)), func(g, m string) { addrs <- [2]string{g, m} })
	}()
	var addr string
	select {
	case a := <-addrs:
		addr, r.metrics = a[0], a[1]
	case err := <-done:
		cancel()
		t.Fatalf("limitkit-rls did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	r.conn, r.client = conn, pb.NewRateLimitServiceClient(conn)
	return r
}

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(p+".tmp", []byte(text), 0o600))
	require.NoError(t, os.Rename(p+".tmp", p))
	return p
}

func req(domain string, kv ...string) *pb.RateLimitRequest {
	r := &pb.RateLimitRequest{Domain: domain}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Descriptors = append(r.Descriptors, &rlpb.RateLimitDescriptor{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: kv[i], Value: kv[i+1]}}})
	}
	return r
}

func TestServesHealthAndDecisions(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, sharedConfig)
	r := start(t, "-config", dir)
	h, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)
	resp, err := r.client.ShouldRateLimit(context.Background(), req("shared", "api_key", "k"))
	require.NoError(t, err)
	require.Equal(t, pb.RateLimitResponse_OK, resp.OverallCode)
	require.Equal(t, uint32(49), resp.Statuses[0].LimitRemaining)
	_, err = r.client.ShouldRateLimit(context.Background(), req(""))
	require.ErrorContains(t, err, "domain must not be empty")
}

func TestBadFlagsAndConfig(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-config is required"},
		{[]string{"-config", "/nonexistent"}, "no such file"},
		{[]string{"-config", "x", "-sync", "1s"}, "-sync needs -redis"},
		{[]string{"-config", "x", "-redis", "nohost"}, ""},
	} {
		err := Run(ctx, tc.args, nil, slog.New(slog.DiscardHandler), nil)
		require.Error(t, err, tc.args)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
}

// hammer sends n requests for descriptor kv... from 64 goroutines spread
// over clients and returns how many were admitted.
func hammer(t *testing.T, clients []*running, n int, kv ...string) int64 {
	t.Helper()
	var admitted, next atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[g%len(clients)].client
			for next.Add(1) <= int64(n) {
				resp, err := c.ShouldRateLimit(context.Background(), req("shared", kv...))
				if err != nil {
					t.Error(err)
					return
				}
				if resp.OverallCode == pb.RateLimitResponse_OK {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return admitted.Load()
}

func sharedQuota(t *testing.T, exact bool, redisArgs ...string) {
	dir := t.TempDir()
	writeConfig(t, dir, sharedConfig)
	key := fmt.Sprintf("k-%d", time.Now().UnixNano())
	var clients []*running
	for range 3 {
		clients = append(clients, start(t, append([]string{"-config", dir, "-watch", "0", "-store-timeout", redistest.StoreTimeout.String()}, redisArgs...)...))
	}
	if redisArgs[0] == "-redis" {
		// the store the servers logged: pipelined unless turned off
		pipelined := !slices.Contains(redisArgs, "-redis-pipeline=false")
		for _, c := range clients {
			require.Equal(t, pipelined, strings.Contains(c.log.String(), " pipelined"), c.log.String())
		}
	}
	// api_key binds (50), tenant has room: a denied request charges tenant nothing
	got := hammer(t, clients, 300, "api_key", key, "tenant", key)
	if exact {
		if got != 50 {
			for i, c := range clients {
				t.Logf("server %d log:\n%s", i, c.log.String())
			}
		}
		require.Equal(t, int64(50), got, "exactly the limit admitted across three servers")
	} else {
		require.LessOrEqual(t, got, int64(50), "the fleet tier never admits above the limit")
		require.Positive(t, got)
	}
	// look at tenant with hits_addend 0 (charges nothing)
	r := req("shared", "tenant", key)
	r.Descriptors[0].HitsAddend = wrapUint(0)
	resp, err := clients[0].client.ShouldRateLimit(context.Background(), r)
	require.NoError(t, err)
	if exact {
		require.Equal(t, uint32(100000-50), resp.Statuses[0].LimitRemaining, "tenant charged only for the admitted requests")
	}
}

func TestSharedQuotaEmbedded(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, sharedConfig)
	c := start(t, "-config", dir)
	require.Equal(t, int64(50), hammer(t, []*running{c}, 300, "api_key", "e", "tenant", "e"))
}

func TestSharedQuotaRedisNode(t *testing.T) {
	s := redistest.StartNode(t)
	sharedQuota(t, true, "-redis", loadedURL(s.Addr))
}

// loadedURL is a Redis URL whose client timeouts a loaded test host
// cannot exceed, so that no decision is a fail-open admission.
func loadedURL(addrs string) string {
	return "redis://" + addrs + "?dial_timeout=10s&read_timeout=10s&write_timeout=10s&pool_timeout=10s"
}

func TestSharedQuotaRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	sharedQuota(t, true, "-redis", loadedURL(strings.Join(c.Addrs(), ",")))
}

// TestSharedQuotaRedisUnpipelined is TestSharedQuotaRedisNode with
// pipelining (the default) turned off: a round trip per decision.
func TestSharedQuotaRedisUnpipelined(t *testing.T) {
	s := redistest.StartNode(t)
	sharedQuota(t, true, "-redis", loadedURL(s.Addr), "-redis-pipeline=false")
}

func TestSharedQuotaFleetWriteBack(t *testing.T) {
	s := redistest.StartNode(t)
	sharedQuota(t, false, "-redis", loadedURL(s.Addr), "-sync", "50ms")
}

// eventually polls cond (a condition on the server's answers, not on
// time) until it holds; the deadline only bounds a broken reload.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReloadOnChangeAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, sharedConfig)
	r := start(t, "-config", dir, "-watch", "10ms")
	limitOf := func() uint32 {
		resp, err := r.client.ShouldRateLimit(context.Background(), req("shared", "api_key", "reload"))
		require.NoError(t, err)
		return resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	require.Equal(t, uint32(50), limitOf())
	writeConfig(t, dir, strings.Replace(sharedConfig, "requests_per_unit: 50", "requests_per_unit: 7", 1))
	eventually(t, func() bool { return limitOf() == 7 }, "the file change was not loaded")

	// a bad file is refused, logged, and the old config keeps serving
	writeConfig(t, dir, "domain: shared\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	r.hup <- syscall.SIGHUP
	eventually(t, func() bool { return strings.Contains(r.log.String(), "configuration refused") }, "the bad file was not refused")
	require.Contains(t, r.log.String(), "invalid rate limit unit 'fortnight'")
	require.Equal(t, uint32(7), limitOf())

	// SIGHUP alone (no file watching) reloads
	writeConfig(t, dir, sharedConfig)
	r2 := start(t, "-config", dir+"/config.yaml", "-watch", "0")
	_ = r2
	writeConfig(t, dir, strings.Replace(sharedConfig, "requests_per_unit: 50", "requests_per_unit: 9", 1))
	r2.hup <- syscall.SIGHUP
	eventually(t, func() bool {
		resp, err := r2.client.ShouldRateLimit(context.Background(), req("shared", "api_key", "x"))
		return err == nil && resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() == 9
	}, "SIGHUP did not reload")
}

func wrapUint(v uint64) *wrapperspb.UInt64Value { return wrapperspb.UInt64(v) }

// TestChangeBeforeReadyIsLoaded: a configuration written while the server
// starts (here: from the ready callback, before the watcher's first tick)
// is a change the watcher loads. The baseline fingerprint is the one of the
// file the server loaded at start; a baseline taken later would swallow
// this write and serve the old limit for ever (a loaded CI host once hit
// exactly that between the ready callback and the watch loop).
func TestChangeBeforeReadyIsLoaded(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, sharedConfig)
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-addr", "127.0.0.1:0", "-metrics-addr", "", "-config", dir, "-watch", "10ms"},
			make(chan os.Signal), slog.New(slog.NewTextHandler(io.Discard, nil)), func(g, _ string) {
				writeConfig(t, dir, strings.Replace(sharedConfig, "requests_per_unit: 50", "requests_per_unit: 7", 1))
				addrs <- g
			})
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		cancel()
		t.Fatalf("limitkit-rls did not start: %v", err)
	}
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	eventually(t, func() bool {
		resp, err := client.ShouldRateLimit(context.Background(), req("shared", "api_key", "ready"))
		return err == nil && resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() == 7
	}, "the change written before the watch loop began was not loaded")
}

// scrape returns the command's /metrics.
func (r *running) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// metricValue is the value of the series line name (with its labels) in
// a scrape, 0 when absent.
func metricValue(t *testing.T, scrape, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err, line)
			return f
		}
	}
	return 0
}

// TestNearLimitMetric: limitkit_rls_near_limit_total counts the hits above
// floor(0.8 × limit) as the reference's near_limit does: of ten requests
// on a limit of 10, the 9th and 10th; a charge of 5 from 5 to 10, two; a
// denied request, none.
func TestNearLimitMetric(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, `
domain: near
descriptors:
  - key: k
    rate_limit: {unit: year, requests_per_unit: 10}
`)
	r := start(t, "-config", dir)
	ctx := context.Background()
	const nearSeries = `limitkit_rls_near_limit_total{policy="rls:near.k"}`
	const allowedSeries = `limitkit_decisions_total{outcome="allowed",policy="rls:near.k"}`
	// the window is the calendar year (the reference's, on the wall
	// clock): a run that straddles a new year is repeated on new keys
	for attempt := range 3 {
		before := r.scrape(t)
		year := time.Now().UTC().Year()
		key := func(s string) string { return s + strconv.Itoa(attempt) }
		for range 11 {
			_, err := r.client.ShouldRateLimit(ctx, req("near", "k", key("a")))
			require.NoError(t, err)
		}
		for range 2 {
			_, err := r.client.ShouldRateLimit(ctx, req("near", "k", key("b")))
			require.NoError(t, err)
		}
		five := req("near", "k", key("c"))
		five.HitsAddend = 5
		for range 3 { // 5, 10 (two near); the third is denied
			_, err := r.client.ShouldRateLimit(ctx, five)
			require.NoError(t, err)
		}
		if time.Now().UTC().Year() != year {
			continue
		}
		after := r.scrape(t)
		require.Equal(t, 4.0, metricValue(t, after, nearSeries)-metricValue(t, before, nearSeries), after)
		require.Equal(t, 14.0, metricValue(t, after, allowedSeries)-metricValue(t, before, allowedSeries), after)
		return
	}
	t.Fatal("every attempt straddled a new year")
}

// TestTuneGC: without GOGC the command runs the collector at GCPercent;
// a GOGC in the environment is left in force.
func TestTuneGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	require.Equal(t, GCPercent, TuneGC(func(string) string { return "" }))
	require.Equal(t, GCPercent, debug.SetGCPercent(100), "the runtime's target")
	gogc := func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}
	require.Equal(t, 100, TuneGC(gogc))
	require.Equal(t, 100, debug.SetGCPercent(100), "the runtime's target")
}

// TestAllowDegraded: a Redis that does not answer at start-up stops the
// server with a message saying what to do, unless -allow-degraded; then
// every decision follows the rule's fail mode (open: admitted, with no
// RPC error) while Redis is away, pipelined (the default) or not, and
// is decided by Redis again, exactly, once it is back.
func TestAllowDegraded(t *testing.T) {
	for _, pipe := range []string{"-redis-pipeline=true", "-redis-pipeline=false"} {
		t.Run(pipe, func(t *testing.T) {
			s := redistest.StartNode(t)
			s.Stop()
			dir := t.TempDir()
			writeConfig(t, dir, sharedConfig)
			args := []string{"-addr", "127.0.0.1:0", "-metrics-addr", "", "-config", dir, "-redis", s.Addr, pipe}
			err := Run(context.Background(), args, nil, slog.New(slog.DiscardHandler), nil)
			require.ErrorContains(t, err, "Redis does not answer")
			require.ErrorContains(t, err, "-allow-degraded")

			r := start(t, "-config", dir, "-watch", "0", "-redis", s.Addr, pipe, "-allow-degraded")
			for range 5 {
				resp, err := r.client.ShouldRateLimit(context.Background(), req("shared", "api_key", "down"))
				require.NoError(t, err, "a store failure is the fail mode's to decide, not an RPC error")
				require.Equal(t, pb.RateLimitResponse_OK, resp.OverallCode, "failed open")
			}
			s.Restart()
			var last uint32
			eventually(t, func() bool {
				resp, err := r.client.ShouldRateLimit(context.Background(), req("shared", "api_key", "up"))
				require.NoError(t, err)
				rem := resp.Statuses[0].LimitRemaining
				exact := last != 0 && rem == last-1 // two decisions in a row counted at Redis
				last = rem
				return exact
			}, "decided by Redis once it is back")
		})
	}
}
