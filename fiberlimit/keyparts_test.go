package fiberlimit

import (
	"math/rand"
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/keytest"
)

// TestKeyPartsKeysAsTheGeneralPath: the store keys of the global and the
// per-route middleware, which come from the engine's key cache on
// returning clients, are those the route table and the peer define,
// over many paths, methods and peers (IPv4, IPv4-mapped IPv6, IPv6), in
// three passes (misses, then hits), and still after routes are added
// while the app serves (a path that was a 404 gets its new route's key).
func TestKeyPartsKeysAsTheGeneralPath(t *testing.T) {
	st := &keytest.Rec{}
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.Per(1<<30, time.Hour*24*365)}})
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(New(lim))
	app.Get("/users/:id", func(c *fiber.Ctx) error { return nil })
	app.Post("/items", func(c *fiber.Ctx) error { return nil })
	app.All("/all/:id", func(c *fiber.Ctx) error { return nil })
	app.All("/allrouted", New(lim), func(c *fiber.Ctx) error { return nil })
	app.Get("/direct", New(lim, httplimit.WithScope("d")), func(c *fiber.Ctx) error { return nil })
	app.Get("/routed/:x", New(lim), func(c *fiber.Ctx) error { return nil })
	h := app.Handler()
	rc := new(routeCache)

	peers := []net.IP{net.IPv4(203, 0, 113, 7).To4(), net.IPv4(203, 0, 113, 8), net.ParseIP("2001:db8::1"), net.ParseIP("2001:db8::2")}
	peerKey := []string{"203.0.113.7", "203.0.113.8", "2001:db8::/64", "2001:db8::/64"}
	rng := rand.New(rand.NewSource(5))
	paths := append(diffPaths(rng, 200), "/new", "/new/", "/users/9", "/direct", "/routed/1", "/items", "/all/1", "/allrouted")
	methods := []string{"GET", "POST", "HEAD", "PUT"}
	var req fasthttp.Request
	fctx := new(fasthttp.RequestCtx)
	serve := func(method, path string, peer int) []string {
		req.Reset()
		req.Header.SetMethod(method)
		req.SetRequestURI(path)
		fctx.Init(&req, &net.TCPAddr{IP: peers[peer], Port: 40000 + peer}, nil)
		h(fctx)
		return st.Keys()
	}
	check := func(pass int) {
		for _, path := range paths {
			for _, m := range methods {
				for pi := range peers {
					got := serve(m, path, pi)
					if len(got) == 0 {
						continue // fasthttp rejected the URI before fiber
					}
					route := rc.table(app).match(m, string(fctx.URI().PathOriginal())) // c.Path()
					scope := route
					if route != "" && !rc.table(app).any[route] {
						scope = httplimit.RouteScope(m, route)
					}
					want := []string{"p#" + scope + "|" + peerKey[pi]}
					switch route {
					case "/direct":
						want = append(want, "p#d|"+peerKey[pi])
					case "/routed/:x", "/allrouted":
						want = append(want, want[0])
					}
					require.Equal(t, want, got, "pass %d: %s %s from %s", pass, m, path, peers[pi])
				}
			}
		}
	}
	for pass := 0; pass < 3; pass++ {
		check(pass)
	}
	app.Get("/new", func(c *fiber.Ctx) error { return nil })
	app.Add("PUT", "/users/:id/:y?", func(c *fiber.Ctx) error { return nil })
	require.Equal(t, []string{"p#GET /new|203.0.113.7"}, serve("GET", "/new", 0), "a route added while serving")
	for pass := 3; pass < 5; pass++ {
		check(pass)
	}
}
