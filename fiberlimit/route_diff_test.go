package fiberlimit

import (
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// diffPatterns mixes what the table matches itself (literals,
// whole-segment parameters, a last optional parameter or wildcard) with
// what it leaves to fiber.RoutePatternMatch (constraints, parameters
// inside a segment, escapes, wildcards in the middle), and fiber's
// corner cases: an optional parameter behind a three-byte literal (fiber
// buckets routes by their first three bytes), a trailing slash after a
// parameter, upper case, "/*".
var diffPatterns = []string{
	"/", "/users", "/users/:id", "/users/:id/posts", "/users/:id/posts/:pid",
	"/Items/:id?", "/files/*", "/blob/+", "/a/:x?", "/ab/:x?", "/abc/:x?",
	"/static/:p/", "/v1/:ver/docs/*", "/x/:a/:b", "/U/:Id", "/users/me",
	"/file/:name.:ext", "/shop/:id<int>", "/api/v:ver", "/date/:y-:m-:d",
	`/esc/\:lit`, "/opt/:a?/b", "/g/*/end", "/:top", "/n/:a/:b?",
}

var diffPieces = []string{"users", "USERS", "7", "x.y", "posts", "a", "ab", "abc", "b", "files", "blob",
	"1-2-3", "me", "v1", "docs", "static", "file", "f.txt", "shop", "42", "api", "v2", "date", "esc", ":lit",
	"opt", "g", "end", "x", "u", "n", "items", "ITEMS", "", "%41"}

func diffPaths(rng *rand.Rand, n int) []string {
	paths := []string{"/", "//", "/users", "/users/", "/users//", "/a", "/a/", "/ab", "/abc", "/abc/", "/items",
		"/Items/1", "/static/p", "/static/p/", "/blob", "/blob/", "/blob/x/y", "/files", "/files/", "/files/a/b"}
	for len(paths) < n {
		var b strings.Builder
		for k := rng.Intn(5); k >= 0; k-- {
			b.WriteByte('/')
			b.WriteString(diffPieces[rng.Intn(len(diffPieces))])
		}
		switch rng.Intn(4) {
		case 0:
			b.WriteByte('/')
		case 1:
			b.WriteString("//")
		}
		paths = append(paths, b.String())
	}
	return paths
}

// TestRouteTableMatchesFibersRouter is the tables' specification: for
// every route configuration and request tried, the route a global
// middleware computes is the route fiber's router then runs ("" for a
// 404 or 405), with fastroutes.go's matcher and with the public one
// (routes.go's fiber.RoutePatternMatch alone) alike.
func TestRouteTableMatchesFibersRouter(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	paths := diffPaths(rng, 1500)
	configs := []fiber.Config{{}, {CaseSensitive: true}, {StrictRouting: true}, {CaseSensitive: true, StrictRouting: true}, {UnescapePath: true}}
	for ci, cfg := range configs {
		for order := 0; order < 4; order++ {
			pats := append([]string(nil), diffPatterns...)
			if order > 0 {
				rng.Shuffle(len(pats), func(i, j int) { pats[i], pats[j] = pats[j], pats[i] })
			}
			if order == 3 {
				pats = append([]string{"/*"}, pats...) // shadows everything after it
			}
			t.Run(fmt.Sprintf("config%d/order%d", ci, order), func(t *testing.T) {
				cfg.DisableStartupMessage = true
				app := fiber.New(cfg)
				rc, pub := new(routeCache), &routeCache{public: true}
				var got, gotPub string
				app.Use(func(c *fiber.Ctx) error {
					got = rc.table(c.App()).match(c.Method(), c.Path())
					gotPub = pub.table(c.App()).match(c.Method(), c.Path())
					return c.Next()
				})
				for i, p := range pats {
					h := func(c *fiber.Ctx) error { return c.SendString("route:" + c.Route().Path) }
					if i%3 == 2 {
						app.Post(p, h)
					} else {
						app.Get(p, h)
					}
				}
				handler := app.Handler()
				mismatches := 0
				for _, p := range paths {
					for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut} {
						var ctx fasthttp.RequestCtx
						ctx.Request.Header.SetMethod(m)
						ctx.Request.SetRequestURI(p)
						got, gotPub = "unset", "unset"
						handler(&ctx)
						want := ""
						if body := string(ctx.Response.Body()); strings.HasPrefix(body, "route:") {
							want = strings.TrimPrefix(body, "route:")
						} else if m == http.MethodHead && ctx.Response.StatusCode() == http.StatusOK {
							want = routeOfHead(app, p)
						}
						if (got != want || gotPub != want) && mismatches < 10 {
							mismatches++
							t.Errorf("%s %q: fastroutes says %q, the public matcher %q, fiber ran %q (status %d)",
								m, p, got, gotPub, want, ctx.Response.StatusCode())
						}
					}
				}
			})
		}
	}
}

// routeOfHead finds the route of a HEAD request, whose body fiber drops,
// by asking again with GET (fiber registers every GET route for HEAD).
func routeOfHead(app *fiber.App, p string) string {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(http.MethodGet)
	ctx.Request.SetRequestURI(p)
	app.Handler()(&ctx)
	return strings.TrimPrefix(string(ctx.Response.Body()), "route:")
}

// TestRouteTableDoesNotGrowWithPaths: over 20,000 distinct paths (a
// scan) the table is built once, holds nothing derived from requests,
// and is rebuilt only when a route is added.
func TestRouteTableDoesNotGrowWithPaths(t *testing.T) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	rc := new(routeCache)
	var got string
	app.Use(func(c *fiber.Ctx) error {
		got = rc.table(c.App()).match(c.Method(), c.Path())
		return c.Next()
	})
	app.Get("/users/:id", func(c *fiber.Ctx) error { return nil })
	app.Get("/items", func(c *fiber.Ctx) error { return nil })
	h := app.Handler()
	serve := func(p string) string {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(p)
		h(&ctx)
		return got
	}
	before := routeBuilds.Load()
	require.Equal(t, "/users/:id", serve("/users/1"))
	first := rc.t.Load()
	for i := 0; i < 20000; i++ {
		p := fmt.Sprintf("/probe/%d/%x", i, i*7919)
		require.Equal(t, "", serve(p))
	}
	assert.Equal(t, int64(1), routeBuilds.Load()-before, "one build for every request")
	assert.Same(t, first, rc.t.Load())
	tb := rc.t.Load()
	for _, mr := range tb.methods {
		assert.LessOrEqual(t, len(mr.routes), 2, "only the routes")
		assert.LessOrEqual(t, len(mr.fast.static)+len(mr.fast.params), 2, "only the routes")
	}
	// a new route is seen: the route count changed
	app.Get("/probe/:a/:b", func(c *fiber.Ctx) error { return nil })
	h = app.Handler()
	assert.Equal(t, "/probe/:a/:b", serve("/probe/1/2"))
	assert.Equal(t, int64(2), routeBuilds.Load()-before)
}

// TestRouteTableGroupsMountsAndUse: the table agrees with fiber's router
// for routes registered through groups (nested, with their own Use), a
// mounted sub-app (its routes and Use), prefixed app.Use handlers and
// app.All, under each routing configuration.
func TestRouteTableGroupsMountsAndUse(t *testing.T) {
	rng := rand.New(rand.NewSource(29))
	var paths []string
	prefixes := []string{"", "/g", "/g/v1", "/m", "/M", "/api", "/all", "/m/sub"}
	for _, p := range diffPaths(rng, 400) {
		paths = append(paths, prefixes[rng.Intn(len(prefixes))]+p)
	}
	paths = append(paths, "/g/users", "/g/users/7", "/g/v1/items/3", "/m/s/9", "/m/", "/m", "/api/x", "/all", "/all/", "/G/USERS/1")
	configs := []fiber.Config{{}, {CaseSensitive: true}, {StrictRouting: true}, {CaseSensitive: true, StrictRouting: true}}
	for ci, cfg := range configs {
		t.Run(fmt.Sprintf("config%d", ci), func(t *testing.T) {
			cfg.DisableStartupMessage = true
			app := fiber.New(cfg)
			rc, pub := new(routeCache), &routeCache{public: true}
			var got, gotPub string
			app.Use(func(c *fiber.Ctx) error {
				got = rc.table(c.App()).match(c.Method(), c.Path())
				gotPub = pub.table(c.App()).match(c.Method(), c.Path())
				return c.Next()
			})
			h := func(c *fiber.Ctx) error { return c.SendString("route:" + c.Route().Path) }
			next := func(c *fiber.Ctx) error { return c.Next() }
			app.Use("/api", next)
			app.Get("/api/:id", h)
			app.All("/all", h)
			g := app.Group("/g", next)
			g.Use(next)
			g.Get("/users/:id", h)
			g.Post("/users", h)
			v1 := g.Group("/v1")
			v1.Get("/items/:id?", h)
			v1.Get("/files/*", h)
			sub := fiber.New(cfg)
			sub.Use(next)
			sub.Get("/s/:p", h)
			sub.Get("/", h)
			sub.Get("/sub/*", h)
			app.Mount("/m", sub)
			for i, p := range diffPatterns[:12] {
				if i%2 == 0 {
					app.Get(p, h)
				} else {
					g.Get(p, h)
				}
			}
			handler := app.Handler()
			mismatches, routed := 0, map[string]bool{}
			for _, p := range paths {
				for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
					var ctx fasthttp.RequestCtx
					ctx.Request.Header.SetMethod(m)
					ctx.Request.SetRequestURI(p)
					got, gotPub = "unset", "unset"
					handler(&ctx)
					want := ""
					if body := string(ctx.Response.Body()); strings.HasPrefix(body, "route:") {
						want = strings.TrimPrefix(body, "route:")
						routed[want] = true
					}
					if (got != want || gotPub != want) && mismatches < 10 {
						mismatches++
						t.Errorf("%s %q: fastroutes says %q, the public matcher %q, fiber ran %q (status %d)",
							m, p, got, gotPub, want, ctx.Response.StatusCode())
					}
				}
			}
			for _, r := range []string{"/api/:id", "/all", "/g/users/:id", "/g/users", "/g/v1/items/:id?", "/g/v1/files/*", "/m/s/:p", "/m/sub/*"} {
				assert.True(t, routed[r], "no request reached %s: the test would not notice it mismatching", r)
			}
		})
	}
}
