package rls

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

const shareConfig = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: 40}
  - key: tenant
    value: "acme-*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 30}
`

// shareSide is one quota served two ways: ShouldRateLimit and an HTTP
// middleware built from Config.Match, each on its own store handle.
type shareSide struct {
	srv  *Server
	http http.Handler
}

func newShare(t *testing.T, rlsStore, httpStore core.Store, clk core.Clock, probe []string, kv func(keyfuncs.Request) []string) shareSide {
	t.Helper()
	cfg, err := ParseConfig(map[string][]byte{"edge.yaml": []byte(shareConfig)})
	require.NoError(t, err)
	opts := []core.Option{core.WithClock(clk), core.WithTimeout(redistest.StoreTimeout)}
	srv, err := New(rlsStore, cfg, WithLimiterOptions(opts...))
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	p, _, ok := cfg.Match("edge", probe...)
	require.True(t, ok)
	lim, err := core.NewLimiter(httpStore, p, opts...)
	require.NoError(t, err)
	t.Cleanup(lim.Release)
	// the key function the contract names: Match's key, scope ""
	key := func(r keyfuncs.Request) (string, error) {
		_, k, ok := cfg.Match("edge", kv(r)...)
		if !ok {
			return "", keyfuncs.ErrNoKey
		}
		return k, nil
	}
	h := nethttp.New(lim, httplimit.WithScope(""), httplimit.WithKey(key))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	return shareSide{srv: srv, http: h}
}

// apiKey is Envoy's descriptor (api_key, <X-Api-Key>), as a route's
// request_headers action sends it.
func apiKey(r keyfuncs.Request) []string { return []string{"api_key", r.Header("X-Api-Key")} }

func (s shareSide) viaHTTP(t *testing.T, header, value string) bool {
	r := httptest.NewRequest("GET", "/api", nil)
	r.Header.Set(header, value)
	w := httptest.NewRecorder()
	s.http.ServeHTTP(w, r)
	switch w.Code {
	case http.StatusOK:
		return true
	case http.StatusTooManyRequests:
		return false
	}
	t.Errorf("HTTP status %d", w.Code)
	return false
}

func (s shareSide) viaRLS(t *testing.T, kv ...string) (bool, *pb.RateLimitResponse) {
	resp, err := s.srv.ShouldRateLimit(context.Background(), request("edge", desc(kv...)))
	if err != nil {
		t.Error(err)
		return false, nil
	}
	return resp.OverallCode == pb.RateLimitResponse_OK, resp
}

// hammer sends n requests through the middleware and n through
// ShouldRateLimit for one descriptor from 2*workers goroutines and
// returns how many were admitted in all.
func (s shareSide) hammer(t *testing.T, workers, n int, header, value string, kv ...string) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 2 * workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / workers {
				var ok bool
				if w%2 == 0 {
					ok = s.viaHTTP(t, header, value)
				} else {
					ok, _ = s.viaRLS(t, kv...)
				}
				if ok {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return admitted.Load()
}

func testShareContract(t *testing.T, rlsStore, httpStore core.Store) {
	clk := core.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	s := newShare(t, rlsStore, httpStore, clk, []string{"api_key", "x"}, apiKey)

	// sequential: what the middleware spent, the RLS sees, and back
	for range 15 {
		require.True(t, s.viaHTTP(t, "X-Api-Key", "alice"))
	}
	ok, resp := s.viaRLS(t, "api_key", "alice")
	require.True(t, ok)
	require.EqualValues(t, 40-16, resp.Statuses[0].LimitRemaining)
	for range 24 {
		ok, _ := s.viaRLS(t, "api_key", "alice")
		require.True(t, ok)
	}
	require.False(t, s.viaHTTP(t, "X-Api-Key", "alice"), "the RLS spent the rest of the quota")
	ok, _ = s.viaRLS(t, "api_key", "alice")
	require.False(t, ok)
	// another key is another counter
	require.True(t, s.viaHTTP(t, "X-Api-Key", "bob"))

	// concurrent: 8 goroutines each way, 100 attempts each way, on one
	// key: exactly the limit admitted in total
	require.EqualValues(t, 40, s.hammer(t, 8, 96, "X-Api-Key", "carol", "api_key", "carol"))

	// the next window starts afresh on both sides
	clk.Advance(time.Hour)
	require.True(t, s.viaHTTP(t, "X-Api-Key", "alice"))
	ok, resp = s.viaRLS(t, "api_key", "alice")
	require.True(t, ok)
	require.EqualValues(t, 38, resp.Statuses[0].LimitRemaining)

	// share_threshold: every value the wildcard matches is one counter,
	// whichever side and value
	ts := newShare(t, rlsStore, httpStore, clk, []string{"tenant", "acme-x"}, func(r keyfuncs.Request) []string {
		return []string{"tenant", r.Header("X-Tenant")}
	})
	var admitted int
	for i := range 20 {
		if ts.viaHTTP(t, "X-Tenant", "acme-"+string(rune('a'+i))) {
			admitted++
		}
		if ok, _ := ts.viaRLS(t, "tenant", "acme-z"+string(rune('a'+i))); ok {
			admitted++
		}
	}
	require.Equal(t, 30, admitted)
}

// TestMatchSharesQuotaEmbedded: a middleware built from Config.Match and
// the Server on one embedded store charge one counter: N requests through
// HTTP and M through ShouldRateLimit admit exactly the limit in total.
func TestMatchSharesQuotaEmbedded(t *testing.T) {
	st := memstore.MustNew()
	defer st.Close()
	testShareContract(t, st, st)
}

// TestMatchSharesQuotaRedis: the same through one Redis, the middleware
// and the Server each on its own client and store, as two processes are.
func TestMatchSharesQuotaRedis(t *testing.T) {
	node := redistest.StartNode(t)
	open := func() core.Store {
		c := redis.NewClient(node.ClientOptions())
		t.Cleanup(func() { c.Close() })
		st, err := redisstore.New(c, redisstore.WithClientTime()) // the test's clock decides
		require.NoError(t, err)
		return st
	}
	testShareContract(t, open(), open())
}

// TestMatch: what Match answers for each kind of descriptor.
func TestMatch(t *testing.T) {
	cfg, err := ParseConfig(map[string][]byte{"edge.yaml": []byte(shareConfig + `
  - key: free
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
`)})
	require.NoError(t, err)
	p, k, ok := cfg.Match("edge", "api_key", "abc")
	require.True(t, ok)
	require.Equal(t, "rls:edge.api_key", p.Name)
	require.Equal(t, []core.Limit{{Requests: 40, Window: time.Hour}}, p.Limits)
	require.Equal(t, "7:api_key3:abc", k)
	// the policy is a copy: changing it changes nothing for the Server
	p.Limits[0].Requests = 1
	p2, _, _ := cfg.Match("edge", "api_key", "abc")
	require.EqualValues(t, 40, p2.Limits[0].Requests)
	_, k, ok = cfg.Match("edge", "tenant", "acme-7")
	require.True(t, ok)
	require.Equal(t, "6:tenant7:*acme-*", k)
	_, k, _ = cfg.Match("edge", "api_key", string(make([]byte, 300)))
	require.Len(t, k, 33)
	require.Equal(t, byte('~'), k[0])
	require.Equal(t, httplimit.StoreKey("", "7:api_key300:"+string(make([]byte, 300))), "|"+k, "long keys are bounded as httplimit bounds them")
	for _, kv := range [][]string{
		{"free", "x"}, {"zero", "x"}, {"nope", "x"}, {"api_key"}, {}, {"api_key", "a", "b", "c"},
	} {
		_, _, ok := cfg.Match("edge", kv...)
		require.False(t, ok, "%q", kv)
	}
	_, _, ok = cfg.Match("other", "api_key", "abc")
	require.False(t, ok)
	var nilCfg *Config
	_, _, ok = nilCfg.Match("edge", "api_key", "abc")
	require.False(t, ok)
}
