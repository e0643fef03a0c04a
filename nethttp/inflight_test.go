package nethttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
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

// inflightServer is a middleware with a rate limit of rate per hour and a
// concurrency limit of 2 per X-User, over a handler that blocks until its
// request's gate is closed (or panics for "panic").
func inflightServer(t *testing.T, rate int64) (http.Handler, *core.Limiter, *core.Concurrency) {
	t.Helper()
	store := memstore.MustNew()
	t.Cleanup(func() { _ = store.Close() })
	lim := core.MustNewLimiter(store, core.Policy{Name: "exports", Limits: []core.Limit{core.PerHour(rate)}})
	conc, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "exports", Max: 2})
	require.NoError(t, err)
	key, err := keyfuncs.Header("X-User")
	require.NoError(t, err)
	mw, err := nethttp.NewMiddleware(lim, httplimit.WithKey(key), httplimit.WithScope("exports"), httplimit.WithConcurrency(conc))
	require.NoError(t, err)
	return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("do") {
		case "panic":
			panic("boom")
		case "wait":
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusOK)
	})), lim, conc
}

func get(h http.Handler, ctx context.Context, do string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/export?do="+do, nil).WithContext(ctx)
	r.Header.Set("X-User", "alice")
	w := httptest.NewRecorder()
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(w, r)
	}()
	return w
}

// TestConcurrencyHeldUntilHandlerReturns: two requests blocked in the
// handler hold both slots; the third is a 429 with Retry-After and the
// quota body; once one returns (its client gone), a slot is free again.
// A panicking handler gives its slot back.
func TestConcurrencyHeldUntilHandlerReturns(t *testing.T) {
	h, _, _ := inflightServer(t, 1000)
	var wg sync.WaitGroup
	cancels := make([]context.CancelFunc, 2)
	started := make(chan struct{}, 2)
	for i := range cancels {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			get(h, ctx, "wait")
		}()
	}
	<-started
	<-started
	// the two are in their handlers once a third is refused
	var w *httptest.ResponseRecorder
	require.Eventually(t, func() bool {
		w = get(h, context.Background(), "")
		return w.Code == http.StatusTooManyRequests
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"))
	assert.Contains(t, w.Body.String(), "exports")
	cancels[0]() // the client goes away: its handler returns
	require.Eventually(t, func() bool {
		return get(h, context.Background(), "").Code == http.StatusOK
	}, 10*time.Second, time.Millisecond)
	cancels[1]()
	wg.Wait()
	for i := 0; i < 5; i++ {
		get(h, context.Background(), "panic")
	}
	assert.Equal(t, http.StatusOK, get(h, context.Background(), "").Code, "a panicking handler kept its slot")
}

// TestConcurrencyWithRateLimit: a rate denial gives its slot back, and a
// concurrency denial charges no rate.
func TestConcurrencyWithRateLimit(t *testing.T) {
	h, lim, conc := inflightServer(t, 3)
	ctx := context.Background()
	// hold both slots directly, as two running requests would
	r1, d, _ := conc.Acquire(ctx, "exports|alice")
	require.True(t, d.Allowed)
	r2, _, _ := conc.Acquire(ctx, "exports|alice")
	for i := 0; i < 10; i++ {
		require.Equal(t, http.StatusTooManyRequests, get(h, ctx, "").Code)
	}
	u, err := lim.PeekN(ctx, "exports|alice", 1)
	require.NoError(t, err)
	assert.Equal(t, int64(2), u.Remaining, "a concurrency denial charged the rate limit (a fresh key leaves 2 after one more)")
	r1.Release()
	r2.Release()
	for i := 0; i < 3; i++ {
		w := get(h, ctx, "")
		require.Equal(t, http.StatusOK, w.Code)
		// the binding decision has the least room: the slot's (1 left)
		// until the rate's is lower (0 on the third)
		assert.Equal(t, strconv.Itoa(min(1, 2-i)), w.Header().Get("X-RateLimit-Remaining"))
	}
	require.Equal(t, http.StatusTooManyRequests, get(h, ctx, "").Code)
	// the rate denials held no slot
	a, d, _ := conc.Acquire(ctx, "exports|alice")
	require.True(t, d.Allowed)
	b, d, _ := conc.Acquire(ctx, "exports|alice")
	require.True(t, d.Allowed, "a rate denial leaked a slot")
	a.Release()
	b.Release()
}
