package fiberlimit

import (
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// TestHotKeyAllocatesNothing: with the default key and one returning
// client, the middleware allocates nothing per request, per route and
// under app.Use (what NewMiddleware's doc promises), headers included.
func TestHotKeyAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	st, err := memstore.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	l := core.MustNewLimiter(st, core.Policy{Name: "a", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
	ok := func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) }
	perRoute := fiber.New(fiber.Config{DisableStartupMessage: true})
	perRoute.Get("/x/:id", New(l), ok)
	global := fiber.New(fiber.Config{DisableStartupMessage: true})
	global.Use(New(l))
	global.Get("/x/:id", ok)
	for name, app := range map[string]*fiber.App{"per route": perRoute, "app.Use": global} {
		h := app.Handler()
		var req fasthttp.Request
		req.Header.SetMethod(fiber.MethodGet)
		req.SetRequestURI("/x/1")
		ctx := new(fasthttp.RequestCtx)
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40001}, nil)
		serve := func() {
			ctx.Response.Reset()
			h(ctx)
		}
		serve()
		require.Equal(t, fiber.StatusOK, ctx.Response.StatusCode(), name)
		require.NotEmpty(t, ctx.Response.Header.Peek("X-RateLimit-Remaining"), name)
		assert.Zero(t, testing.AllocsPerRun(200, serve), name)
	}
}
