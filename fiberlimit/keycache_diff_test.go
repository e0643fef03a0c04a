package fiberlimit

import (
	"fmt"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/keytest"
)

// TestCachedKeyEqualsGeneralPath: one cached and one uncached
// middleware side by side, shared by 11 apps (appTables eviction) of
// several configs, with groups, a mount, a path-rewriting middleware and
// routes added while serving: their keys agree on every request.
func TestCachedKeyEqualsGeneralPath(t *testing.T) {
	st := &keytest.Rec{}
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.Per(1<<30, time.Hour*24*365)}})
	cached, general := New(lim), New(lim, httplimit.WithScopeFunc(keytest.Scope))
	configs := []fiber.Config{{}, {CaseSensitive: true}, {StrictRouting: true}, {UnescapePath: true}, {CaseSensitive: true, StrictRouting: true, UnescapePath: true}}
	var hs []fasthttp.RequestHandler
	var apps []*fiber.App
	nop := func(c *fiber.Ctx) error { return nil }
	for i := 0; i < 11; i++ {
		cfg := configs[i%len(configs)]
		cfg.DisableStartupMessage = true
		app := fiber.New(cfg)
		if i%3 == 0 {
			app.Use(func(c *fiber.Ctx) error {
				if strings.HasPrefix(c.Path(), "/rw") {
					c.Path("/users/" + c.Path()[3:])
				}
				return c.Next()
			})
		}
		app.Use(cached, general)
		app.Get("/users/:id", nop)
		app.Post("/Items", nop)
		app.Get("/a/b/", nop)
		app.Get(fmt.Sprintf("/app%d/*", i), nop)
		g := app.Group("/g", cached, general)
		g.Get("/x/:y?", nop)
		if i%2 == 0 {
			sub := fiber.New(cfg)
			sub.Get("/s/:id", nop)
			app.Mount("/m", sub)
		}
		apps = append(apps, app)
		hs = append(hs, app.Handler())
	}
	peers := []net.IP{net.IPv4(203, 0, 113, 7).To4(), net.IPv4(203, 0, 113, 8), net.ParseIP("::ffff:203.0.113.7")}
	rng := rand.New(rand.NewSource(9))
	paths := append(diffPaths(rng, 100), "/users/1", "/USERS/1", "/users/1/", "/users/%41", "/items", "/Items", "/a/b", "/a/b/", "/A/B//",
		"/rw1", "/rwX", "/g/x", "/g/x/1", "/g/X/1/", "/m/s/1", "/M/s/1", "/app3/q", "/APP3/q", "/app%33/q")
	methods := []string{"GET", "POST", "HEAD", "PUT", "get", "FOO", ""}
	var req fasthttp.Request
	fctx := new(fasthttp.RequestCtx)
	total := 0
	for pass := 0; pass < 4; pass++ {
		if pass == 2 {
			for i, app := range apps {
				app.Get("/late/:x", nop)
				app.Get(fmt.Sprintf("/app%d/special", i), nop)
			}
		}
		for ai := range hs {
			ai := (ai + pass*3) % len(hs)
			for _, path := range append(paths, "/late/1", fmt.Sprintf("/app%d/special", ai)) {
				for _, m := range methods {
					for pi := range peers {
						req.Reset()
						if m != "" {
							req.Header.SetMethod(m)
						}
						req.SetRequestURI(path)
						fctx.Init(&req, &net.TCPAddr{IP: peers[pi], Port: 4000 + pi}, nil)
						hs[ai](fctx)
						got := st.Keys()
						if len(got)%2 != 0 {
							t.Fatalf("odd keys %v", got)
						}
						for k := 0; k < len(got); k += 2 {
							require.Equal(t, got[k+1], got[k], "pass %d app %d: %q %q from %s", pass, ai, m, path, peers[pi])
						}
						if m != "get" && m != "FOO" { // fiber answers an unknown method 501 before any handler
							require.NotEmpty(t, got, "pass %d app %d: %q %q from %s reached no store", pass, ai, m, path, peers[pi])
						}
						total += len(got) / 2
					}
				}
			}
		}
	}
	// at least one pair per request of a known method: 4 passes × 11 apps
	// × 121 paths (100 random, 19 listed, 2 late) × 5 methods × 3 peers
	require.GreaterOrEqual(t, total, 4*11*121*5*3, "keys compared")
	t.Logf("keys compared: %d", total)
}
