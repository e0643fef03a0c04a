package echolimit

import (
	"github.com/limitkit/limitkit/httplimit"

	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
)

type ctxKey struct{}

// customContext is a context of another type, as a middleware wrapping
// echo's context passes on.
type customContext struct{ echo.Context }

// TestRequestView: the view answers every keyfuncs.Request method from
// echo's context, its own type or a custom one around it.
func TestRequestView(t *testing.T) {
	e := echo.New()
	var seen int
	e.GET("/users/:id", func(c echo.Context) error {
		seen++
		views := []keyfuncs.Request{&request{c: c}, &request{c: customContext{c}}}
		for _, q := range views {
			assert.Equal(t, "GET", q.Method())
			assert.Equal(t, "/users/:id", q.Route())
			assert.Equal(t, "/users/7", q.Path())
			assert.Equal(t, "k1", q.Header("X-Api-Key"))
			assert.Equal(t, []string{"a", "b"}, q.HeaderValues("X-Multi"))
			assert.Equal(t, "3", q.Query("page"))
			assert.Equal(t, "203.0.113.7:4000", q.RemoteAddr())
			assert.Equal(t, "principal", q.Value("user"))
			assert.Equal(t, "ctx", q.Value(ctxKey{}))
			assert.Nil(t, q.Value("missing"))
		}
		return nil
	})
	req := httptest.NewRequest("GET", "/users/7?page=3", nil)
	req.RemoteAddr = "203.0.113.7:4000"
	req.Header.Set("X-Api-Key", "k1")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req = req.WithContext(context.WithValue(req.Context(), ctxKey{}, "ctx"))
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { c.Set("user", "principal"); return next(c) }
	})
	e.ServeHTTP(httptest.NewRecorder(), req)
	assert.Equal(t, 1, seen)
}

// TestCustomContextUsesThePool: behind a middleware that passes on its own
// context type, the middleware keys and limits as with echo's context.
func TestCustomContextUsesThePool(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	lim := core.MustNewLimiter(store, core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(2)}})
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return next(customContext{c}) }
	})
	e.Use(New(lim, httplimit.WithKey(func(r keyfuncs.Request) (string, error) { return r.Header("X-Api-Key"), nil })))
	e.GET("/x/:id", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	codes := map[string][]int{}
	for i := 0; i < 3; i++ {
		for _, k := range []string{"a", "b"} {
			req := httptest.NewRequest("GET", "/x/1", nil)
			req.Header.Set("X-Api-Key", k)
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			codes[k] = append(codes[k], w.Code)
		}
	}
	assert.Equal(t, map[string][]int{"a": {200, 200, 429}, "b": {200, 200, 429}}, codes)
}

// TestWrapCache: the handler built for a next handler is returned again
// for the same next, and each next gets a handler that calls it
// (TestWrapCacheAllocs counts what a wrap costs).
func TestWrapCache(t *testing.T) {
	wc := new(wrapCache)
	builds := 0
	build := func(next echo.HandlerFunc) echo.HandlerFunc {
		builds++
		return func(c echo.Context) error { return next(c) }
	}
	var calls []string
	mk := func(name string) echo.HandlerFunc {
		return func(echo.Context) error { calls = append(calls, name); return nil }
	}
	a, b := mk("a"), mk("b")
	mw := wc.middleware(build)
	ha := mw(a)
	require.Equal(t, funcPtr(ha), funcPtr(mw(a)), "same next, same handler")
	hb := mw(b)
	require.NoError(t, ha(nil))
	require.NoError(t, hb(nil))
	require.NoError(t, mw(a)(nil))
	assert.Equal(t, []string{"a", "b", "a"}, calls)
	assert.Equal(t, 2, builds)
	assert.Nil(t, wc.middleware(func(echo.HandlerFunc) echo.HandlerFunc { return nil })(nil))
}

// TestWrapCacheAllocs: a wrap for the same next allocates nothing, and a
// next that is new every time costs what a build costs without the
// cache. (Named for CI's non-race allocation step.)
func TestWrapCacheAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	wc := new(wrapCache)
	builds := 0
	build := func(next echo.HandlerFunc) echo.HandlerFunc {
		builds++
		return func(c echo.Context) error { return next(c) }
	}
	calls := 0
	a := func(echo.Context) error { calls++; return nil }
	mw := wc.middleware(build)
	_ = mw(a)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = mw(a) }))
	fresh := new(wrapCache).middleware(build)
	without := testing.AllocsPerRun(100, func() {
		n := 0
		next := func(echo.Context) error { n++; return nil } // a new closure each run
		_ = build(next)
	})
	assert.Equal(t, without, testing.AllocsPerRun(100, func() {
		n := 0
		next := func(echo.Context) error { n++; return nil }
		_ = fresh(next)
	}), "a new next each time costs what it did without the cache")
	assert.Positive(t, without, "a build allocates: the comparison means something")
	assert.Equal(t, 1+101+101, builds, "a is built once; every new next is built (AllocsPerRun runs 1 + 100 times)")
}

// TestMiddlewareAfterLimiter: with a middleware registered after the
// limiter (its next handler is new every request), requests are limited
// as before.
func TestMiddlewareAfterLimiter(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	lim := core.MustNewLimiter(store, core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(2)}})
	e := echo.New()
	e.Use(New(lim))
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { c.Response().Header().Set("X-After", "1"); return next(c) }
	})
	e.GET("/x", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	var codes []int
	for i := 0; i < 3; i++ {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
		codes = append(codes, w.Code)
		if w.Code == http.StatusOK {
			assert.Equal(t, "1", w.Header().Get("X-After"))
		}
	}
	assert.Equal(t, []int{200, 200, 429}, codes)
}

// TestUnrouted: codePtr is what reflect.Value.Pointer returns (the
// test that fails when Go changes how a func value is laid out), and
// unrouted tells echo's not-found and method-not-allowed handlers from
// other functions and nil.
func TestUnrouted(t *testing.T) {
	mk := func(n int) echo.HandlerFunc { return func(echo.Context) error { _ = n; return nil } }
	top := func(echo.Context) error { return nil }
	for _, f := range []echo.HandlerFunc{echo.NotFoundHandler, echo.MethodNotAllowedHandler, mk(1), mk(2), top, nil} {
		assert.Equal(t, reflect.ValueOf(f).Pointer(), codePtr(f), "codePtr must agree with reflect.Value.Pointer")
	}
	assert.True(t, unrouted(echo.NotFoundHandler))
	assert.True(t, unrouted(echo.MethodNotAllowedHandler))
	assert.True(t, unrouted(nil))
	assert.False(t, unrouted(mk(3)))
}

// TestKeyPartsAgree: the view's KeyParts are the request's method, its
// Route and RemoteAddr, and as Table the ID of the routes that say
// whether the route accepts every method (none for no route), for a
// routed request, HEAD, a route of e.Any, a 404, a 405 and an odd method
// (the key cache keys by them instead of the three calls; the scope is a
// function of them: keycache_diff_test.go).
func TestKeyPartsAgree(t *testing.T) {
	e := echo.New()
	var n int
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			v := &request{c: c}
			p, ok := v.KeyParts(true)
			require.True(t, ok)
			assert.Equal(t, [3]string{v.Method(), v.Route(), v.RemoteAddr()}, [3]string{p.Method, p.Route, p.Peer})
			if p.Route != "" {
				assert.Equal(t, anyRoutes.Table(c.Echo()), p.Table)
				assert.NotZero(t, p.Table)
			} else {
				assert.Zero(t, p.Table)
			}
			assert.True(t, p.StableRoute)
			p, ok = v.KeyParts(false)
			require.True(t, ok)
			assert.Equal(t, [3]string{"", "", v.RemoteAddr()}, [3]string{p.Method, p.Route, p.Peer})
			assert.Zero(t, p.Table)
			n++
			return next(c)
		}
	})
	e.GET("/items/:id", func(c echo.Context) error { return nil })
	e.Any("/any", func(c echo.Context) error { return nil })
	for _, rq := range [][2]string{{"GET", "/items/1"}, {"HEAD", "/items/1"}, {"POST", "/items/1"}, {"GET", "/nope"}, {"FOO", "/items/1"}, {"PUT", "/any"}} {
		r := httptest.NewRequest(rq[0], rq[1], nil)
		r.RemoteAddr = "192.0.2.1:5"
		e.ServeHTTP(httptest.NewRecorder(), r)
	}
	assert.Equal(t, 6, n)
}
