package fiberlimit

import (
	"fmt"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
)

// routeMatchApp is a fiber app of the shape BenchmarkGlobalMiddleware
// serves, plus a few common API patterns: 9 static routes, 9 with a
// parameter, an optional parameter, a wildcard, a constraint.
func routeMatchApp() *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	h := func(c *fiber.Ctx) error { return nil }
	for i := 0; i < 9; i++ {
		app.Get(fmt.Sprintf("/r%d/:id", i), h)
		app.Get(fmt.Sprintf("/s%d", i), h)
	}
	app.Get("/api/users/:id/posts/:pid", h)
	app.Get("/api/items/:id?", h)
	app.Get("/assets/*", h)
	app.Get("/shop/:id<int>", h)
	app.Get("/bench", h)
	return app
}

// routeMatchPaths are requests for BenchmarkRouteMatch and
// TestFastRoutesAllocateNothing: each kind of route, an upper-case path,
// a miss; the last one is matched by fiber.RoutePatternMatch on both
// paths (a constraint).
var routeMatchPaths = []struct{ name, path, route string }{
	{"static", "/bench", "/bench"},
	{"static-upper", "/BENCH", "/bench"},
	{"param", "/r7/42", "/r7/:id"},
	{"params", "/api/users/7/posts/9", "/api/users/:id/posts/:pid"},
	{"optional", "/api/items", "/api/items/:id?"},
	{"wildcard", "/assets/css/site.css", "/assets/*"},
	{"miss", "/nothing/here", ""},
	{"constraint", "/shop/42", "/shop/:id<int>"},
}

// BenchmarkRouteMatch is what fastroutes.go buys: the route lookup a
// Use-handler request costs when the key cache cannot answer (a new
// client or path, or keys that are not a function of the peer and
// route), with fastroutes.go's matcher and with routes.go's
// fiber.RoutePatternMatch alone, side by side for each kind of route.
func BenchmarkRouteMatch(b *testing.B) {
	app := routeMatchApp()
	n := routeCount(app)
	tables := []struct {
		name string
		t    *routeTable
	}{{"fast", buildTable(app, n, true)}, {"public", buildTable(app, n, false)}}
	for _, p := range routeMatchPaths {
		for _, tb := range tables {
			b.Run(p.name+"/"+tb.name, func(b *testing.B) {
				if got := tb.t.match(fiber.MethodGet, p.path); got != p.route {
					b.Fatalf("%s: %q, want %q", p.path, got, p.route)
				}
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					sinkRoute = tb.t.match(fiber.MethodGet, p.path)
				}
			})
		}
	}
}

var sinkRoute string

// TestFastRoutesAllocateNothing: fastroutes.go's matcher finds every
// route BenchmarkRouteMatch asks for, as the public matcher does, and
// allocates nothing for the patterns it compiles (the reason it exists);
// the public one allocates for a route with parameters.
func TestFastRoutesAllocateNothing(t *testing.T) {
	app := routeMatchApp()
	fast, public := buildTable(app, routeCount(app), true), buildTable(app, routeCount(app), false)
	for _, p := range routeMatchPaths {
		assert.Equal(t, p.route, fast.match(fiber.MethodGet, p.path), p.path)
		assert.Equal(t, p.route, public.match(fiber.MethodGet, p.path), p.path)
		if raceEnabled || p.name == "constraint" {
			continue
		}
		assert.Zero(t, testing.AllocsPerRun(50, func() { _ = fast.match(fiber.MethodGet, p.path) }), p.path)
	}
	if !raceEnabled {
		assert.NotZero(t, testing.AllocsPerRun(50, func() { _ = public.match(fiber.MethodGet, "/r7/42") }),
			"the public matcher no longer allocates: measure whether fastroutes.go still buys anything")
	}
}
