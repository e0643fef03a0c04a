package exampleapp

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

func TestParseFlags(t *testing.T) {
	env := map[string]string{EnvJWTSecret: "from-env", EnvAPIKeys: " k1, ,k2 "}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name string
		args []string
		want Config
		err  string
	}{
		{"defaults", nil, Config{Addr: ":8080", JWTSecret: "from-env", APIKeys: []string{"k1", "k2"}, FleetSize: 1}, ""},
		{"all flags", []string{"-addr", "127.0.0.1:9", "-redis", "r:6380", "-rules", "x.yaml", "-trusted-proxies", "10.0.0.0/8, 192.168.0.0/16", "-jwt-secret", "s", "-allow-degraded", "-sync", "250ms", "-fleet-size", "4"},
			Config{Addr: "127.0.0.1:9", Redis: "r:6380", RulesFile: "x.yaml", TrustedProxies: []string{"10.0.0.0/8", "192.168.0.0/16"}, JWTSecret: "s", APIKeys: []string{"k1", "k2"}, AllowDegraded: true, Sync: 250 * time.Millisecond, FleetSize: 4}, ""},
		{"admin token", []string{"-admin-token", "T"}, Config{Addr: ":8080", JWTSecret: "from-env", APIKeys: []string{"k1", "k2"}, FleetSize: 1, AdminToken: "T"}, ""},
		{"redis URL", []string{"-redis", "rediss://u:p@r:6380/2"}, Config{Addr: ":8080", Redis: "rediss://u:p@r:6380/2", JWTSecret: "from-env", APIKeys: []string{"k1", "k2"}, FleetSize: 1}, ""},
		{"negative sync", []string{"-sync", "-1s"}, Config{}, "-sync -1s: want 0 (exact)"},
		{"huge sync", []string{"-sync", "2h"}, Config{}, "-sync 2h0m0s: want 0 (exact)"},
		{"fleet size 0", []string{"-fleet-size", "0"}, Config{}, "-fleet-size 0: want the number of app servers"},
		{"unknown flag", []string{"-port", "1"}, Config{}, "flag provided but not defined: -port"},
		{"stray argument", []string{"extra"}, Config{}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFlags("test", tt.args, getenv)
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRoutePath(t *testing.T) {
	for _, tt := range []struct{ route, path, want string }{
		{"GET /api1", "/api1", "/api1"},
		{"GET example.com/items/{id}", "/items/7", "/items/{id}"},
		{"/users/:id", "/users/7", "/users/:id"},
		{"", "/raw", "/raw"},
		{"GET /", "/anything", "/"},
		{"example.com", "/x", "/x"},
	} {
		assert.Equal(t, tt.want, RoutePath(tt.route, tt.path), tt.route)
	}
}

func TestNewErrors(t *testing.T) {
	_, err := New(Config{TrustedProxies: []string{"not-a-cidr"}})
	assert.ErrorContains(t, err, "-trusted-proxies")
	_, err = New(Config{RulesFile: filepath.Join(t.TempDir(), "missing.yaml")})
	assert.Error(t, err)
}

// client drives the example API's handler in process.
type client struct {
	t   *testing.T
	h   http.Handler
	ip  string
	hdr map[string]string
}

func (c client) do(method, path string) *httptest.ResponseRecorder {
	c.t.Helper()
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = c.ip + ":40000"
	for k, v := range c.hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	return w
}

// sendUntilDenied sends up to max requests and returns how many were
// admitted before the first 429, and that 429.
func (c client) sendUntilDenied(method, path string, max int) (int, *httptest.ResponseRecorder) {
	c.t.Helper()
	for i := 0; i < max; i++ {
		w := c.do(method, path)
		if w.Code == http.StatusTooManyRequests {
			return i, w
		}
		require.Equal(c.t, http.StatusOK, w.Code, w.Body.String())
	}
	return max, nil
}

// TestEndpointTableThroughHTTP is the smoke test of the examples' wiring:
// the embedded rules → policies → limiters on the embedded store → the
// nethttp adapter → the example API, with a manual clock.
func TestEndpointTableThroughHTTP(t *testing.T) {
	clock := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	app, err := New(Config{JWTSecret: "test-secret-test-secret", APIKeys: []string{"k-good"}}, WithClock(clock))
	require.NoError(t, err)
	defer app.Close()
	assert.Empty(t, app.SampleToken, "no sample token when the secret is configured")
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)

	alice, err := app.Token("alice", time.Hour)
	require.NoError(t, err)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	t.Run("anonymous: 50 GETs a minute per IP across all paths", func(t *testing.T) {
		anon := client{t: t, h: h, ip: "198.51.100.1"}
		w := anon.do("GET", "/api1")
		assert.Equal(t, "50", w.Header().Get("X-RateLimit-Limit"))
		assert.Contains(t, w.Body.String(), `"caller":"anonymous 198.51.100.1"`)
		n, denied := anon.sendUntilDenied("GET", "/some/other/path", 100)
		assert.Equal(t, 49, n)
		require.NotNil(t, denied)
		assert.NotEmpty(t, denied.Header().Get("Retry-After"))
		assert.Equal(t, "0", denied.Header().Get("X-RateLimit-Remaining"))
		assert.Equal(t, http.StatusTooManyRequests, anon.do("GET", "/api3").Code, "one quota for every GET path")
		other := client{t: t, h: h, ip: "198.51.100.2"}
		assert.Equal(t, http.StatusOK, other.do("GET", "/api1").Code, "another IP has its own quota")
		clock.Advance(time.Minute + 4*time.Second) // one minute and one 4s bucket
		assert.Equal(t, http.StatusOK, anon.do("GET", "/api1").Code, "the per-minute limit refills")
	})

	t.Run("logged-in: per-endpoint, per-method limits", func(t *testing.T) {
		u := client{t: t, h: h, ip: "198.51.100.9", hdr: bearer(alice)}
		w := u.do("POST", "/api2")
		assert.Equal(t, "100", w.Header().Get("X-RateLimit-Limit"))
		assert.Contains(t, w.Body.String(), `"caller":"user/alice"`)
		n, denied := u.sendUntilDenied("POST", "/api2", 200)
		assert.Equal(t, 99, n)
		require.NotNil(t, denied)
		w = u.do("GET", "/api2")
		assert.Equal(t, http.StatusOK, w.Code, "GET /api2 has its own quota")
		assert.Equal(t, "200", w.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, "150", u.do("GET", "/api3").Header().Get("X-RateLimit-Limit"))
		// Another user behind the same IP is not affected.
		bob, err := app.Token("bob", time.Hour)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, client{t: t, h: h, ip: "198.51.100.9", hdr: bearer(bob)}.do("POST", "/api2").Code)
		// A logged-in GET on another path matches no rule: not limited.
		w = u.do("GET", "/elsewhere")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Empty(t, w.Header().Get("X-RateLimit-Limit"))
	})

	t.Run("a forged token is anonymous, not alice", func(t *testing.T) {
		other, err := (&App{secret: []byte("another-secret-another")}).Token("alice", time.Hour)
		require.NoError(t, err)
		w := client{t: t, h: h, ip: "198.51.100.20", hdr: bearer(other)}.do("GET", "/api1")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "50", w.Header().Get("X-RateLimit-Limit"))
		assert.Contains(t, w.Body.String(), "anonymous")
	})

	t.Run("API keys: listed ones authenticate", func(t *testing.T) {
		w := client{t: t, h: h, ip: "198.51.100.30", hdr: map[string]string{"X-API-Key": "k-good"}}.do("GET", "/api3")
		assert.Equal(t, "150", w.Header().Get("X-RateLimit-Limit"))
		assert.Contains(t, w.Body.String(), `"caller":"key/`)
		assert.NotContains(t, w.Body.String(), "k-good", "the raw key never appears")
		w = client{t: t, h: h, ip: "198.51.100.30", hdr: map[string]string{"X-API-Key": "k-bad"}}.do("GET", "/api3")
		assert.Equal(t, "50", w.Header().Get("X-RateLimit-Limit"))
	})
}

func TestTrustedProxiesAndRulesFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
rules:
  - name: tenant
    route: /*
    key: "header:X-Tenant"
    limits: ["2 per 1m"]
`), 0o600))
	app, err := New(Config{RulesFile: file, TrustedProxies: []string{"10.0.0.0/8"}})
	require.NoError(t, err)
	defer app.Close()
	assert.NotEmpty(t, app.SampleToken, "a generated secret comes with a sample token")
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	proxy := client{t: t, h: h, ip: "10.1.2.3", hdr: map[string]string{"X-Tenant": "acme", "X-Forwarded-For": "203.0.113.5"}}
	n, denied := proxy.sendUntilDenied("GET", "/x", 5)
	assert.Equal(t, 2, n)
	require.NotNil(t, denied)
	w := client{t: t, h: h, ip: "10.1.2.3", hdr: map[string]string{"X-Tenant": "other", "X-Forwarded-For": "203.0.113.5"}}.do("GET", "/x")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "anonymous 203.0.113.5", "the client IP comes from the trusted proxy's header")
}

func TestRedisStore(t *testing.T) {
	srv := redistest.StartNode(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	// Two app instances on one Redis share the quota.
	var hs []http.Handler
	for range 2 {
		app, err := New(Config{JWTSecret: "shared-secret-shared"}, WithRedisClient(c), WithStoreTimeout(redistest.StoreTimeout))
		require.NoError(t, err)
		defer app.Close()
		_, h, err := app.HTTPHandler()
		require.NoError(t, err)
		hs = append(hs, h)
	}
	allowed := 0
	for i := 0; i < 60; i++ {
		w := client{t: t, h: hs[i%2], ip: "198.51.100.77"}.do("GET", "/api1")
		if w.Code == http.StatusOK {
			allowed++
		}
	}
	assert.Equal(t, 50, allowed, "50 per minute across both instances")
	app, err := New(Config{Redis: srv.Addr})
	require.NoError(t, err)
	require.NoError(t, app.Close())
}

func TestReply(t *testing.T) {
	assert.Equal(t, `{"ok":true,"endpoint":"GET /api1","caller":"user/a\"b"}`+"\n", string(Reply("GET /api1", `user/a"b`)))
}
