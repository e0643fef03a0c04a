package fiber3limit

import (
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
)

// diffPatterns are fiber's pattern kinds (literals, parameters, optional
// parameters, wildcards, constraints, several parameters in a segment,
// escapes) and its router's corner cases: an optional parameter behind a
// literal of fewer or more than three bytes (fiber tries a route only for
// paths that share its leading literal's first three bytes), a trailing
// slash after a parameter, upper case, "/*".
var diffPatterns = []string{
	"/", "/users", "/users/:id", "/users/:id/posts/:pid",
	"/Items/:id?", "/files/*", "/blob/+", "/a/:x?", "/ab/:x?", "/abc/:x?",
	"/static/:p/", "/v1/:ver/docs/*", "/x/:a/:b", "/U/:Id", "/users/me",
	"/file/:name.:ext", "/shop/:id<int>", "/api/v:ver", "/date/:y-:m-:d",
	`/esc/\:lit`, "/opt/:a?/b", "/g/*/end", "/:top", "/n/:a/:b?",
}

var diffPieces = []string{"users", "USERS", "7", "x.y", "posts", "a", "ab", "abc", "b", "files", "blob",
	"1-2-3", "me", "v1", "docs", "static", "file", "f.txt", "shop", "42", "api", "v2", "date", "esc", ":lit",
	"opt", "g", "end", "x", "u", "n", "items", "ITEMS", "", "%41"}

// TestRouteMatchesFibersRouter: for every route configuration and
// request tried, the route a global (app.Use) middleware's view names is
// the route fiber's router then runs ("" for a 404 or 405).
func TestRouteMatchesFibersRouter(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	paths := []string{"/", "//", "/users", "/users/", "/a", "/a/", "/ab", "/abc", "/abc/", "/items",
		"/Items/1", "/static/p", "/static/p/", "/blob", "/blob/", "/blob/x/y", "/files", "/files/", "/files/a/b"}
	for len(paths) < 1000 {
		var b strings.Builder
		for k := rng.Intn(5); k >= 0; k-- {
			b.WriteByte('/')
			b.WriteString(diffPieces[rng.Intn(len(diffPieces))])
		}
		if rng.Intn(3) == 0 {
			b.WriteByte('/')
		}
		paths = append(paths, b.String())
	}
	configs := []fiber.Config{{}, {CaseSensitive: true}, {StrictRouting: true}, {CaseSensitive: true, StrictRouting: true}}
	for ci, cfg := range configs {
		for order := 0; order < 3; order++ {
			pats := append([]string(nil), diffPatterns...)
			if order > 0 {
				rng.Shuffle(len(pats), func(i, j int) { pats[i], pats[j] = pats[j], pats[i] })
			}
			t.Run(fmt.Sprintf("config%d/order%d", ci, order), func(t *testing.T) {
				app := fiber.New(cfg)
				var got string
				app.Use(func(c fiber.Ctx) error {
					got = (&request{c}).Route()
					return c.Next()
				})
				for i, p := range pats {
					h := func(c fiber.Ctx) error { return c.SendString("route:" + c.Route().Path) }
					if i%3 == 2 {
						app.Post(p, h)
					} else {
						app.Get(p, h)
					}
				}
				handler := app.Handler()
				mismatches := 0
				for _, p := range paths {
					for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
						var ctx fasthttp.RequestCtx
						ctx.Request.Header.SetMethod(m)
						ctx.Request.SetRequestURI(p)
						got = "unset"
						handler(&ctx)
						if got == "unset" {
							continue // fiber answered before its handlers
						}
						want := ""
						if body := string(ctx.Response.Body()); strings.HasPrefix(body, "route:") {
							want = strings.TrimPrefix(body, "route:")
						}
						if got != want && mismatches < 10 {
							mismatches++
							t.Errorf("%s %q: the view says %q, fiber ran %q (status %d)", m, p, got, want, ctx.Response.StatusCode())
						}
					}
				}
			})
		}
	}
}
