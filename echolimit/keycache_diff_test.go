package echolimit

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/keytest"
)

type myCtx struct{ echo.Context }

// TestCachedKeyEqualsGeneralPath: a middleware with the default key and
// scope (whose keys come from the key cache) and an uncached copy (the
// default scope as a scope function) side by side get the same store key
// on every request, over routes, groups, 404s, 405s, odd methods and
// peers, with one route registered under every method on one of the
// Echos sharing the middleware only and one registered while serving
// (written by an outside review of the key cache).
func TestCachedKeyEqualsGeneralPath(t *testing.T) {
	st := &keytest.Rec{}
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	cached, general := New(lim), New(lim, httplimit.WithScopeFunc(keytest.Scope))
	total := 0
	for cfg := 0; cfg < 4; cfg++ {
		e := echo.New()
		e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if p := c.Request().URL.Path; strings.HasPrefix(p, "/rw") {
					c.Request().URL.Path = "/users/" + p[3:]
				}
				if c.Request().Method == "XGET" {
					c.Request().Method = ""
				}
				return next(c)
			}
		})
		if cfg&1 != 0 {
			e.Pre(cached, general) // before routing
		}
		if cfg&2 != 0 {
			e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c echo.Context) error { return next(&myCtx{c}) }
			})
		}
		e.Use(cached, general)
		nop := func(echo.Context) error { return nil }
		if cfg == 3 { // the route accepts every method on this Echo only
			e.Any("/users/:id", nop)
		} else {
			e.GET("/users/:id", nop)
			e.POST("/users/:id", nop)
		}
		e.Any("/any/*", nop)
		g := e.Group("/g", cached, general)
		g.GET("/x", nop)
		g.GET("/y/:z", nop, cached, general)
		for round := 0; round < 3; round++ {
			if round == 1 { // a route registered while serving
				e.Any("/late", nop)
			}
			for _, m := range []string{"GET", "POST", "DELETE", "FOO", "XGET", "HEAD", "OPTIONS"} {
				for _, p := range []string{"/users/1", "/users/1/", "/rw2", "/any/a/b", "/g/x", "/g/y/1", "/g/nope", "/nope", "/", "/late"} {
					for _, peer := range []string{"203.0.113.7:1", "203.0.113.7:2", "[2001:db8::1]:3", "", "bad"} {
						r := httptest.NewRequest("GET", p, nil)
						r.Method = m
						r.RemoteAddr = peer
						e.ServeHTTP(httptest.NewRecorder(), r)
						got := st.Keys()
						total += len(got) / 2
						if peer != "" && peer != "bad" {
							require.NotEmpty(t, got, "cfg %d %s %s %s reached no store", cfg, m, p, peer)
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
	t.Logf("keys compared: %d", total)
	// at least one pair per request from a keyable peer: 4 configs × 3
	// rounds × 7 methods × 9 paths × 3 peers
	require.GreaterOrEqual(t, total, 4*3*7*9*3, "keys compared")
}
