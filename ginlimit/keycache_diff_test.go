package ginlimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/keytest"
)

// TestCachedKeyEqualsGeneralPath: a middleware with the default key and
// scope (whose keys come from the key cache) and an uncached copy (the
// default scope as a scope function) side by side get the same store key
// on every request, over routes, groups, 404s, 405s, odd methods and
// peers, with one route registered under every method on one of the
// engines sharing the middleware only and one registered while serving
// (written by an outside review of the key cache).
func TestCachedKeyEqualsGeneralPath(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	st := &keytest.Rec{}
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	cached, general := New(lim), New(lim, httplimit.WithScopeFunc(keytest.Scope))
	total, keyed := 0, 0
	for _, cfg := range []int{0, 1, 2, 3} {
		e := gin.New()
		e.HandleMethodNotAllowed = cfg&1 != 0
		e.RedirectFixedPath = cfg&2 != 0
		e.Use(func(c *gin.Context) { // rewrites the method seen by later middleware
			if c.Request.Method == "XGET" {
				c.Request.Method = ""
			}
		})
		e.Use(cached, general)
		nop := func(*gin.Context) {}
		if cfg == 3 { // the route accepts every method on this engine only
			e.Any("/users/:id", nop)
		} else {
			e.GET("/users/:id", nop)
			e.POST("/users/:id", nop)
		}
		e.Any("/any/*rest", nop)
		g := e.Group("/g", cached, general)
		g.GET("/x/", nop)
		e.NoRoute(cached, general, nop)
		e.NoMethod(cached, general, nop)
		for round := 0; round < 3; round++ {
			if round == 1 { // a route registered while serving
				e.Any("/late", nop)
			}
			for _, m := range []string{"GET", "POST", "DELETE", "FOO", "XGET", "HEAD", "OPTIONS"} {
				for _, p := range []string{"/users/1", "/users/1/", "/USERS/1", "/any/a/b", "/g/x", "/g/x/", "/nope", "/g//x/", "/late"} {
					for _, peer := range []string{"203.0.113.7:1", "203.0.113.7:2", "[2001:db8::1]:3", "", "bad"} {
						r := httptest.NewRequest("GET", p, nil)
						r.Method = m
						r.RemoteAddr = peer
						w := httptest.NewRecorder()
						e.ServeHTTP(w, r)
						got := st.Keys()
						total += len(got)
						if peer != "" && peer != "bad" && w.Code/100 != 3 { // gin redirects before any handler
							require.NotEmpty(t, got, "cfg %d %s %s %s reached no store", cfg, m, p, peer)
							keyed++
						}
						require.Zero(t, len(got)%2, "%v", got)
						for i := 0; i < len(got); i += 2 {
							require.Equal(t, got[i+1], got[i], "cfg %d %s %s %s", cfg, m, p, peer)
						}
					}
				}
			}
		}
	}
	// every request from a keyable peer that gin did not redirect was
	// compared (above); most were: of the 4 configs × 3 rounds × 7 methods
	// × 8 paths (and /late) × 3 peers, only GET and POST to a path with a trailing
	// slash or the wrong case are redirected
	t.Logf("keys compared: %d; %d requests keyed", total/2, keyed)
	require.GreaterOrEqual(t, keyed, 4*3*7*8*3*9/10, "requests keyed")
	_ = http.MethodGet
}
