package nethttp_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/nethttp"
)

// chiApp is a chi router with two routes under one global limiter of 2
// a minute, keyed per route with WithRoute when route is true.
func chiApp(t *testing.T, route bool) http.Handler {
	store := memstore.MustNew()
	t.Cleanup(func() { store.Close() })
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}})
	r := chi.NewRouter()
	var opts []httplimit.Option
	if route {
		opts = append(opts, nethttp.WithRoute(func(req *http.Request) string {
			return r.Find(chi.NewRouteContext(), req.Method, req.URL.Path)
		}))
	}
	r.Use(nethttp.New(l, opts...))
	ok := func(w http.ResponseWriter, req *http.Request) { _, _ = w.Write([]byte(chi.URLParam(req, "id"))) }
	r.Get("/users/{id}", ok)
	r.Get("/items", ok)
	r.Route("/admin", func(ar chi.Router) { ar.Get("/stats/{day}", ok) })
	return r
}

func chiGet(h http.Handler, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "203.0.113.7:40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestChiGlobalMiddlewarePerRoute: with WithRoute and chi's Mux.Find, a
// global chi middleware keys each route pattern apart (two /users/{id}
// paths share one quota; /items has its own; a subrouter's pattern is
// found too); without it, chi routes after the middleware and every
// route shares one quota.
func TestChiGlobalMiddlewarePerRoute(t *testing.T) {
	h := chiApp(t, true)
	assert.Equal(t, 200, chiGet(h, "/users/1").Code)
	w := chiGet(h, "/users/2")
	require.Equal(t, 200, w.Code)
	assert.Equal(t, "2", w.Body.String(), "chi's URL params still work")
	assert.Equal(t, 429, chiGet(h, "/users/3").Code, "one quota for the route pattern")
	assert.Equal(t, 200, chiGet(h, "/items").Code, "another route: its own quota")
	assert.Equal(t, 200, chiGet(h, "/items").Code)
	assert.Equal(t, 429, chiGet(h, "/items").Code)
	assert.Equal(t, 200, chiGet(h, "/admin/stats/mon").Code, "a subrouter's route: its own quota")
	assert.Equal(t, 200, chiGet(h, "/admin/stats/tue").Code)
	assert.Equal(t, 429, chiGet(h, "/admin/stats/wed").Code)
	assert.Equal(t, 404, chiGet(h, "/nope").Code, "no route: the shared unmatched quota")

	h = chiApp(t, false)
	assert.Equal(t, 200, chiGet(h, "/users/1").Code)
	assert.Equal(t, 200, chiGet(h, "/items").Code)
	assert.Equal(t, 429, chiGet(h, "/admin/stats/mon").Code, "without WithRoute: one quota across routes")
}

func TestWithRouteNil(t *testing.T) {
	_, err := nethttp.NewMiddleware(core.MustNewLimiter(memstore.MustNew(), core.Policy{Name: "x", Limits: []core.Limit{core.PerMinute(1)}}), nethttp.WithRoute(nil))
	assert.ErrorContains(t, err, "WithRoute(nil)")
}
