package fiber3limit_test

import (
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/fiber3limit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

// TestGlobalKeysGroupsAndMounts: a global app.Use middleware charges each
// request to the route that serves it, with the group's and the mount's
// prefix in the scope, the first matching route in fiber's order winning
// (a static route registered before a parameter route), and no route for
// a path no route serves.
func TestGlobalKeysGroupsAndMounts(t *testing.T) {
	env := adaptertest.NewEnv(t)
	l := env.Limiter(t, core.Policy{Name: "g", Limits: []core.Limit{core.PerMinute(100)}})
	app := fiber.New()
	app.Use(fiber3limit.New(l, httplimit.WithClock(env.Clock)))
	ok := func(c fiber.Ctx) error { return c.SendString("ok") }
	api := app.Group("/api")
	api.Get("/users/new", ok)
	api.Get("/users/:id", ok)
	sub := fiber.New()
	sub.Post("/items/:id", ok)
	app.Use("/sub", sub)
	app.All("/any", ok)
	h := app.Handler()

	for _, tc := range []struct{ method, target, key string }{
		{"GET", "/api/users/7", "g#GET /api/users/:id|203.0.113.7"},
		{"GET", "/api/users/new", "g#GET /api/users/new|203.0.113.7"},
		{"HEAD", "/api/users/7", "g#GET /api/users/:id|203.0.113.7"},
		{"GET", "/API/Users/8/", "g#GET /api/users/:id|203.0.113.7"},
		{"POST", "/sub/items/3", "g#POST /sub/items/:id|203.0.113.7"},
		{"DELETE", "/any", "g#/any|203.0.113.7"},
		{"GET", "/any", "g#/any|203.0.113.7"},
		{"GET", "/nowhere", "g#|203.0.113.7"},
		{"POST", "/api/users/7", "g#|203.0.113.7"},
	} {
		env.Store.Keys()
		var ctx fasthttp.RequestCtx
		adaptertest.FastCtx(&ctx, adaptertest.Request{Method: tc.method, Target: tc.target, Peer: adaptertest.Peer1})
		h(&ctx)
		assert.Equal(t, []string{tc.key}, env.Store.Keys(), "%s %s", tc.method, tc.target)
		require.NotEmpty(t, string(ctx.Response.Header.Peek("X-RateLimit-Limit")), "%s %s", tc.method, tc.target)
	}
}
