package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// customers is a LimitSource over a map of requests per hour.
type customers struct {
	mu    sync.Mutex
	rows  map[string]int64
	calls atomic.Int64
}

func (c *customers) source(_ context.Context, id string) ([]core.Limit, bool, error) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.rows[id]
	if !ok {
		return nil, false, nil
	}
	return []core.Limit{core.PerHour(n)}, true, nil
}

func sourceHandler(t *testing.T, rows map[string]int64, opts ...httplimit.Option) (http.Handler, *customers, *core.Sourced) {
	t.Helper()
	store := memstore.MustNew()
	t.Cleanup(func() { store.Close() })
	def := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(2)}})
	c := &customers{rows: rows}
	// A lookup's deadline far beyond any host stall: with the default
	// 100 ms, a request waiting on the shared lookup on a host at load 30
	// fell back to the rule's own limits (a counter of its own) and
	// TestLimitSourceConcurrentExact admitted 38 of 37. The fallback on a
	// slow source has tests of its own (core's, on a fake clock).
	s, err := core.NewSourced(def, c.source, core.SourceConfig{Timeout: time.Hour})
	require.NoError(t, err)
	key, err := keyfuncs.Header("X-Customer")
	require.NoError(t, err)
	opts = append([]httplimit.Option{httplimit.WithKey(key), httplimit.WithLimitSource(s)}, opts...)
	h := nethttp.New(def, opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	return h, c, s
}

func get(h http.Handler, customer string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/v1/items", nil)
	if customer != "" {
		r.Header.Set("X-Customer", customer)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestLimitSourceHeadersDescribeOwnLimits(t *testing.T) {
	h, _, _ := sourceHandler(t, map[string]int64{"acme": 3})
	for i := range 3 {
		w := get(h, "acme")
		require.Equal(t, 200, w.Code)
		assert.Equal(t, "3", w.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, []string{"2", "1", "0"}[i], w.Header().Get("X-RateLimit-Remaining"))
	}
	w := get(h, "acme")
	assert.Equal(t, 429, w.Code)
	assert.Equal(t, "3", w.Header().Get("X-RateLimit-Limit"))
	assert.NotEmpty(t, w.Header().Get("Retry-After"))
	w = get(h, "globex")
	assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"), "not found: the rule's own limits")
}

func TestLimitSourceNotFoundGoesOnToTiers(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	pro := core.MustNewLimiter(store, core.Policy{Name: "api/pro", Limits: []core.Limit{core.PerHour(5)}})
	plan, _ := keyfuncs.Header("X-Plan")
	h, _, _ := sourceHandler(t, map[string]int64{"acme": 3}, httplimit.WithTiers(plan, map[string]*core.Limiter{"pro": pro}))
	assert.Equal(t, "5", get(h, "globex", "X-Plan", "pro").Header().Get("X-RateLimit-Limit"))
	assert.Equal(t, "3", get(h, "acme", "X-Plan", "pro").Header().Get("X-RateLimit-Limit"), "the source first")
}

func TestLimitSourceFallbackKeyNotLookedUp(t *testing.T) {
	h, c, _ := sourceHandler(t, map[string]int64{"acme": 3}, httplimit.WithFallbackKey(keyfuncs.PeerIP().Key))
	for range 3 {
		get(h, "")
	}
	assert.Equal(t, int64(0), c.calls.Load(), "a fallback key is not an identity the source knows")
	get(h, "acme")
	assert.Equal(t, int64(1), c.calls.Load())
}

func TestLimitSourceOtherLimiterRefused(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	a := core.MustNewLimiter(store, core.Policy{Name: "a", Limits: []core.Limit{core.PerHour(2)}})
	b := core.MustNewLimiter(store, core.Policy{Name: "b", Limits: []core.Limit{core.PerHour(2)}})
	s, err := core.NewSourced(a, (&customers{}).source, core.SourceConfig{})
	require.NoError(t, err)
	_, err = httplimit.NewAdapterEngine(httplimit.Adapter{Name: "test"}, b, httplimit.WithLimitSource(s))
	assert.ErrorContains(t, err, "WithLimitSource")
	_, err = httplimit.NewAdapterEngine(httplimit.Adapter{Name: "test"}, b, httplimit.WithLimitSource(nil))
	assert.ErrorContains(t, err, "WithLimitSource(nil)")
}

func TestLimitSourceConcurrentExact(t *testing.T) {
	h, c, s := sourceHandler(t, map[string]int64{"acme": 37})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if get(h, "acme").Code == 200 {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(37), ok.Load())
	assert.Equal(t, int64(1), c.calls.Load())
	c.mu.Lock()
	c.rows["acme"] = 40
	c.mu.Unlock()
	s.Invalidate("acme")
	n := 0
	for get(h, "acme").Code == 200 {
		n++
	}
	assert.Equal(t, 3, n, "the use carries over: 37 used, raised to 40")
}
