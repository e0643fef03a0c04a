package exampleapp

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/internal/redistest"
)

func TestRedisClient(t *testing.T) {
	tests := []struct {
		in       string
		addr     string
		db       int
		user, pw string
		tls      bool
		err      string
	}{
		{in: "localhost:6379", addr: "localhost:6379"},
		{in: "10.0.0.5:7000", addr: "10.0.0.5:7000"},
		{in: "[::1]:6379", addr: "[::1]:6379"},
		{in: "redis://localhost:16399", addr: "localhost:16399"},
		{in: "redis://user:secret@cache:6380/3", addr: "cache:6380", db: 3, user: "user", pw: "secret"},
		{in: "rediss://:secret@cache:6380", addr: "cache:6380", pw: "secret", tls: true},
		{in: "redis://cache", addr: "cache:6379"},
		{in: "localhost", err: `-redis "localhost": address localhost: missing port in address; want host:port`},
		{in: "localhost:port", err: "not host:port"},
		{in: "user@host:6379", err: "not host:port"},
		{in: "http://localhost:6379", err: `scheme "http" (want redis://host:port`},
		{in: "redis://u:hunter2@cache:6380/notadb", err: "redis://***@cache:6380/notadb"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := RedisClient(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.NotContains(t, err.Error(), "hunter2", "no password in errors")
				return
			}
			require.NoError(t, err)
			defer c.Close()
			o := c.(*redis.Client).Options()
			assert.Equal(t, tt.addr, o.Addr)
			assert.Equal(t, tt.db, o.DB)
			assert.Equal(t, tt.user, o.Username)
			assert.Equal(t, tt.pw, o.Password)
			assert.Equal(t, tt.tls, o.TLSConfig != nil)
			assert.True(t, o.ContextTimeoutEnabled)
			assert.Equal(t, 1, o.DialerRetries)
			assert.Equal(t, 0, o.MaxRetries, "no retries (-1 normalized)")
			assert.Equal(t, time.Duration(0), o.MinRetryBackoff)
		})
	}
	c, err := RedisClient("redis://cache:6379?max_retries=5&dial_timeout=2s")
	require.NoError(t, err)
	defer c.Close()
	o := c.(*redis.Client).Options()
	assert.Equal(t, 5, o.MaxRetries, "options in the URL are kept")
	assert.Equal(t, 2*time.Second, o.DialTimeout)
}

func TestClusterClient(t *testing.T) {
	for _, in := range []string{"a:7000, b:7001,c:7002", "redis://a:7000,b:7001,c:7002", "redis://a:7000?addr=b:7001&addr=c:7002"} {
		c, err := ClusterClient(in)
		require.NoError(t, err, in)
		o := c.(*redis.ClusterClient).Options()
		assert.ElementsMatch(t, []string{"a:7000", "b:7001", "c:7002"}, o.Addrs, in)
		assert.True(t, o.ContextTimeoutEnabled)
		_ = c.Close()
	}
	c, err := ClusterClient("rediss://:pw@a:7000")
	require.NoError(t, err)
	o := c.(*redis.ClusterClient).Options()
	assert.Equal(t, []string{"a:7000"}, o.Addrs, "one seed is still a Cluster")
	assert.Equal(t, "pw", o.Password)
	_ = c.Close()
	for _, bad := range []string{"", "a:7000,b", "ftp://a:1", "redis://"} {
		_, err := ClusterClient(bad)
		assert.ErrorContains(t, err, "-cluster", bad)
	}
}

// TestRefusedRedisSaysSo: with the tuned client options a dead server's
// decisions fail at once with "connection refused", not after the whole
// deadline with "context deadline exceeded".
func TestRefusedRedisSaysSo(t *testing.T) {
	addr := freeAddr(t)
	app, err := New(Config{Redis: addr, AllowDegraded: true}, WithLogger(nil))
	require.NoError(t, err)
	defer app.Close()
	srv, _, err := app.HTTPHandler()
	require.NoError(t, err)
	snap := srv.Live().Acquire()
	defer snap.Release()
	r, _ := snap.Set().Rule(app.Rules.Rules()[0].Name)
	for range 3 {
		_, err := snap.Limiter(r).Allow(t.Context(), "k")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "connection refused")
		assert.NotContains(t, err.Error(), "deadline")
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestUnreachableRedisStopsStartup(t *testing.T) {
	addr := freeAddr(t)
	_, err := New(Config{Redis: addr})
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "redis "+addr+" is not usable")
	assert.Contains(t, msg, "connection refused")
	assert.Contains(t, msg, "-allow-degraded")

	app, err := New(Config{Redis: "redis://" + addr, AllowDegraded: true})
	require.NoError(t, err, "-allow-degraded starts anyway")
	defer app.Close()
	require.Error(t, app.StoreErr)
	assert.Contains(t, app.StoreErr.Error(), addr)
}

func TestStart(t *testing.T) {
	_, _, err := Start("test", []string{"-h"})
	assert.ErrorIs(t, err, flag.ErrHelp)

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	_, _, err = Start("test", []string{"-addr", busy.Addr().String()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test: -addr "+busy.Addr().String())
	assert.Contains(t, err.Error(), "address already in use")
	assert.Contains(t, err.Error(), "pick another")

	_, _, err = Start("test", []string{"-redis", freeAddr(t), "-addr", "127.0.0.1:0"})
	assert.ErrorContains(t, err, "connection refused")

	app, ln, err := Start("test", []string{"-addr", "127.0.0.1:0"})
	require.NoError(t, err)
	defer app.Close()
	defer ln.Close()
	line := app.StartupLine("test", ln.Addr())
	assert.Regexp(t, regexp.MustCompile(`^test example listening on 127\.0\.0\.1:\d+; store: embedded in-memory store .*; rules: embedded endpoint table \(rules/default\.yaml\) \(8 rules\); fail modes: open \(api1-get, api2-get, api2-post, api3-get, anonymous-get, login, exports, plans\); metrics: http://127\.0\.0\.1:\d+/metrics; store failures are logged$`), line)
}

func TestStartupLineUnspecifiedHost(t *testing.T) {
	app, err := New(Config{})
	require.NoError(t, err)
	defer app.Close()
	line := app.StartupLine("x", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080})
	assert.Contains(t, line, "metrics: http://localhost:8080/metrics")
}

func TestFailModes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
rules:
  - {name: login, route: /login, key: ip, fail_mode: closed, limits: ["5 per 1m"]}
  - {name: rest, route: /*, key: ip, limits: ["50 per 1m"]}
  - {name: api, route: /api/*, key: ip, limits: ["50 per 1m"]}
`), 0o600))
	app, err := New(Config{RulesFile: file})
	require.NoError(t, err)
	defer app.Close()
	assert.Equal(t, "open (rest, api); closed (login)", app.FailModes())
	assert.Equal(t, file, app.RulesInfo)
}

// TestMetricsEndpoint: /metrics serves the decisions and the embedded
// store's size, and is never rate limited.
func TestMetricsEndpoint(t *testing.T) {
	app, err := New(Config{})
	require.NoError(t, err)
	defer app.Close()
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	c := client{t: t, h: h, ip: "198.51.100.1"}
	for range 55 {
		c.do("GET", "/api1")
	}
	for range 60 {
		w := c.do("GET", MetricsPath)
		require.Equal(t, http.StatusOK, w.Code, "the scraper is not limited by anonymous-get")
		assert.Empty(t, w.Header().Get("X-RateLimit-Limit"))
	}
	body := c.do("GET", MetricsPath).Body.String()
	assert.Contains(t, body, `limitkit_decisions_total{outcome="allowed",policy="anonymous-get"} 50`)
	assert.Contains(t, body, `limitkit_decisions_total{outcome="denied",policy="anonymous-get"} 5`)
	assert.Contains(t, body, `limitkit_memstore_keys{store="default"} 1`)
	assert.Contains(t, body, "go_goroutines")
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// metricValue returns the value of the exposition line that starts with
// series, or -1.
func metricValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestRedisKilledUnderServer kills Redis under the example API (served
// over HTTP in process; rules match the route the mux matched, so the
// fail-closed rule is on an endpoint the API has) and checks that the failure shows in the log and
// in /metrics within the log interval: a fail-open rule admits without
// rate-limit headers, a fail-closed one answers 503, and both are logged
// with kind=connection and counted as degraded.
func TestRedisKilledUnderServer(t *testing.T) {
	srv := redistest.StartNode(t)
	file := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
rules:
  - {name: strict, route: /api1, key: ip, fail_mode: closed, limits: ["100 per 1m"]}
  - {name: lenient, route: /*, key: ip, limits: ["100 per 1m"]}
`), 0o600))
	var logs syncBuffer
	const interval = 200 * time.Millisecond
	app, err := New(Config{Redis: "redis://" + srv.Addr, RulesFile: file},
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithLogInterval(interval))
	require.NoError(t, err)
	defer app.Close()
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	get := func(path string) *http.Response {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	scrape := func() string {
		resp, err := http.Get(ts.URL + MetricsPath)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}

	resp := get("/x")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "100", resp.Header.Get("X-RateLimit-Limit"))
	assert.Empty(t, resp.Header.Get(DegradedHeader))
	assert.Equal(t, http.StatusOK, get("/api1").StatusCode)
	assert.Empty(t, logs.String())

	srv.Kill()
	start := time.Now()
	var lenient, strict *http.Response
	require.Eventually(t, func() bool {
		lenient, strict = get("/x"), get("/api1")
		l := logs.String()
		return strings.Contains(l, "policy=lenient") && strings.Contains(l, "policy=strict")
	}, 5*time.Second, 10*time.Millisecond, "the failure is logged")
	t.Logf("logged %v after the kill:\n%s", time.Since(start), logs.String())

	assert.Equal(t, http.StatusOK, lenient.StatusCode, "fail open admits")
	assert.Empty(t, lenient.Header.Get("X-RateLimit-Limit"), "a degraded decision carries no limit")
	assert.Equal(t, "1", lenient.Header.Get(DegradedHeader), "the response says it was not limited")
	assert.Equal(t, http.StatusServiceUnavailable, strict.StatusCode, "fail closed answers 503")
	l := logs.String()
	assert.Contains(t, l, "level=ERROR")
	assert.Contains(t, l, "kind=connection")
	assert.Contains(t, l, "requests admitted without limiting (fail mode open)")
	assert.Contains(t, l, "requests denied (fail mode closed)")
	assert.Contains(t, l, srv.Addr, "the error names the server")

	body := scrape()
	for _, p := range []string{"lenient", "strict"} {
		assert.Positive(t, metricValue(body, `limitkit_decisions_total{outcome="degraded",policy="`+p+`"}`), p)
		assert.Positive(t, metricValue(body, `limitkit_store_errors_total{kind="connection",policy="`+p+`"}`), p)
	}
	assert.Positive(t, metricValue(body, `limitkit_store_latency_seconds_count{policy="lenient"}`))

	// Later failures are counted into one line per interval, not one each:
	// a burst of failures writes at most one line per interval it spans,
	// plus one, plus one more for the limiter's coarse clock (it may read
	// a millisecond or so behind the wall clock measured here). The bound is causal (a loaded host that stretches the
	// burst over more intervals allows more lines), never a deadline; a
	// logger that wrote a line per failure writes 50 where the burst of a
	// host that is not stalled for seconds allows a few.
	lines := func() int { return strings.Count(logs.String(), "policy=lenient") }
	n := lines()
	const burst = 50
	began := time.Now()
	for range burst {
		get("/x")
	}
	spanned := int(time.Since(began)/interval) + 2
	added := lines() - n
	t.Logf("a burst of %d failures allowed %d lines and wrote %d", burst, spanned, added)
	assert.LessOrEqual(t, added, spanned, "rate-limited: at most one line per interval (+2)")
	if spanned < burst {
		assert.Less(t, added, burst, "rate-limited: fewer lines than failures")
	}
	n = lines()
	require.Eventually(t, func() bool {
		get("/x")
		return lines() > n
	}, 10*time.Second, 10*time.Millisecond, "the next interval's line")
	last := logs.String()[strings.LastIndex(logs.String(), "policy=lenient"):]
	assert.Regexp(t, `failures=\d+`, last)
}

// TestSyncPutsWriteBackInFrontOfRedis: -sync > 0 decides a hot client
// locally from leased quota, so Redis sees far fewer script calls than
// requests, and the limit still holds; without -sync every decision goes
// to Redis. Leases unused for a sync interval are lost (at most the
// lease cap, here 400/4 = 100, per interval: fleet's documented
// under-admission), so the admitted floor counts the intervals the run
// took: a loaded machine stretches it.
func TestSyncPutsWriteBackInFrontOfRedis(t *testing.T) {
	for _, sync := range []time.Duration{0, 500 * time.Millisecond} {
		srv := redistest.StartNode(t)
		file := filepath.Join(t.TempDir(), "rules.yaml")
		require.NoError(t, os.WriteFile(file, []byte(`
rules:
  - {name: hot, route: /*, key: ip, limits: ["400 per 1h"]}
`), 0o600))
		app, err := New(Config{Redis: "redis://" + srv.Addr, RulesFile: file, Sync: sync, FleetSize: 1}, WithStoreTimeout(redistest.StoreTimeout))
		require.NoError(t, err)
		if sync > 0 {
			assert.Contains(t, app.StoreInfo, "write-back, sync 500ms")
		} else {
			assert.Contains(t, app.StoreInfo, "fleet tier (exact")
		}
		_, h, err := app.HTTPHandler()
		require.NoError(t, err)
		rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
		require.NoError(t, rc.ConfigResetStat(context.Background()).Err())
		allowed := 0
		start := time.Now()
		for i := 0; i < 500; i++ {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			req.RemoteAddr = "198.51.100.7:4000"
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK {
				allowed++
			}
		}
		info, err := rc.Info(context.Background(), "commandstats").Result()
		require.NoError(t, err)
		calls := scriptCalls(info)
		elapsed := time.Since(start)
		t.Logf("sync %v: %d of 500 allowed, %d script calls, in %v", sync, allowed, calls, elapsed)
		assert.LessOrEqual(t, allowed, 400, "never above the limit")
		if sync > 0 {
			intervals := 1 + int(elapsed/sync)
			assert.GreaterOrEqual(t, allowed, 400-100*intervals, "leases lose at most the lease cap per sync interval")
			assert.Less(t, calls, 100, "hot key decided locally")
		} else {
			assert.Equal(t, 400, allowed, "exact")
			assert.Less(t, calls, 500, "the deny cache answers the denied requests")
			assert.GreaterOrEqual(t, calls, 400, "every admitted request went to Redis")
		}
		require.NoError(t, rc.Close())
		require.NoError(t, app.Close())
	}
}

// scriptCalls sums the calls of EVAL and EVALSHA in INFO commandstats.
func scriptCalls(info string) int {
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			if i := strings.Index(line, "calls="); i >= 0 {
				v := line[i+len("calls="):]
				if j := strings.IndexByte(v, ','); j >= 0 {
					v = v[:j]
				}
				c, _ := strconv.Atoi(v)
				n += c
			}
		}
	}
	return n
}

// TestCutFlag: a program's own flag, in each form the flag package
// accepts, leaves the shared flags in order.
func TestCutFlag(t *testing.T) {
	for _, c := range []struct {
		args  []string
		value string
		found bool
		rest  []string
	}{
		{[]string{"-addr", ":1", "-cluster", "a:1,b:2", "-watch", "2s"}, "a:1,b:2", true, []string{"-addr", ":1", "-watch", "2s"}},
		{[]string{"--cluster=a:1", "-addr=:1"}, "a:1", true, []string{"-addr=:1"}},
		{[]string{"-cluster", "a:1", "-cluster=b:2"}, "b:2", true, nil},
		{[]string{"-addr", ":1"}, "", false, []string{"-addr", ":1"}},
		{[]string{"-clusterx", "v", "-cluster"}, "", false, []string{"-clusterx", "v"}},
	} {
		value, found, rest := CutFlag(c.args, "cluster")
		assert.Equal(t, c.value, value, c.args)
		assert.Equal(t, c.found, found, c.args)
		assert.Equal(t, c.rest, rest, c.args)
	}
}
