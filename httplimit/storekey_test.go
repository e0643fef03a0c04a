package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// TestStoreKeyIsTheMiddlewares (issue 37): "unblock a user" from code.
// Reset(ctx, "alice") did nothing for a middleware's limiter, whose keys
// are "<scope>|<client>"; StoreKey(RouteScope(method, route), client) is
// the key the middleware uses — net/http's pattern naming its method,
// gin's route with the method prepended, a client key over 256 bytes
// hashed — so a Reset with it unblocks the client on that route only.
func TestStoreKeyIsTheMiddlewares(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	ctx := context.Background()
	long := strings.Repeat("u", 300)
	user := func(r keyfuncs.Request) (string, error) { return r.Header("X-User"), nil }

	netLim := core.MustNewLimiter(store, core.Policy{Name: "net", Limits: []core.Limit{core.PerMinute(1)}})
	mw, err := nethttp.NewMiddleware(netLim, httplimit.WithKey(user))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /login", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.Handle("POST /other", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))

	gin.SetMode(gin.ReleaseMode)
	ginLim := core.MustNewLimiter(store, core.Policy{Name: "gin", Limits: []core.Limit{core.PerMinute(1)}})
	gmw, err := ginlimit.NewMiddleware(ginLim, httplimit.WithKey(user))
	require.NoError(t, err)
	g := gin.New()
	g.GET("/users/:id", gmw, func(*gin.Context) {})

	send := func(h http.Handler, method, path, who string) int {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("X-User", who)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct {
		h             http.Handler
		lim           *core.Limiter
		method, route string
		path, other   string
	}{
		{mux, netLim, "POST", "POST /login", "/login", "/other"},
		{g, ginLim, "GET", "/users/:id", "/users/7", ""},
	} {
		for _, who := range []string{"alice", long} {
			assert.Equal(t, 200, send(c.h, c.method, c.path, who))
			assert.Equal(t, 429, send(c.h, c.method, c.path, who))
			if c.other != "" {
				assert.Equal(t, 200, send(c.h, c.method, c.other, who), "another route: another key")
				assert.Equal(t, 429, send(c.h, c.method, c.other, who))
			}
			key := httplimit.StoreKey(httplimit.RouteScope(c.method, c.route), who)
			d, err := c.lim.PeekN(ctx, key, 1)
			require.NoError(t, err)
			assert.False(t, d.Allowed, "%s: the middleware's key is exhausted", key)
			require.NoError(t, c.lim.Reset(ctx, key))
			assert.Equal(t, 200, send(c.h, c.method, c.path, who), "reset with StoreKey unblocks")
			if c.other != "" {
				assert.Equal(t, 429, send(c.h, c.method, c.other, who), "on that route only")
			}
		}
	}
	assert.Equal(t, "/x", httplimit.RouteScope("", "/x"), "a route for every method")
	assert.Equal(t, "GET /x", httplimit.RouteScope("HEAD", "/x"))
	assert.Equal(t, "OTHER /x", httplimit.RouteScope("BREW", "/x"))
	assert.Equal(t, "example.com/x", httplimit.RouteScope("GET", "example.com/x"))
}
