package fiber3limit_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/fiber3limit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

func benchLimiter(b *testing.B) *core.Limiter {
	b.Helper()
	st, err := memstore.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
}

func newCtx() *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(fiber.MethodGet)
	req.SetRequestURI("/bench")
	req.Header.SetHost("example.com")
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40001}, nil)
	return ctx
}

// benchServe calls the app's fasthttp handler on a reused RequestCtx, as
// fasthttp's server does per connection.
func benchServe(b *testing.B, app *fiber.App) {
	b.Helper()
	h := app.Handler()
	b.Run("serial", func(b *testing.B) {
		ctx := newCtx()
		adaptertest.SerialLoop(b, func() {
			ctx.Response.Reset()
			h(ctx)
		})
		if ctx.Response.StatusCode() != fiber.StatusOK {
			b.Fatalf("status %d", ctx.Response.StatusCode())
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := newCtx()
			for pb.Next() {
				ctx.Response.Reset()
				h(ctx)
			}
		})
	})
}

func app(mw ...fiber.Handler) *fiber.App {
	a := fiber.New()
	hs := []any{}
	for _, h := range mw {
		hs = append(hs, h)
	}
	hs = append(hs, func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	a.Get("/bench", hs[0], hs[1:]...)
	return a
}

// BenchmarkBaseline is a fiber app routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) { benchServe(b, app()) }

// BenchmarkMiddleware adds fiber3limit on the route (memstore, one hot key,
// the three X-RateLimit headers).
func BenchmarkMiddleware(b *testing.B) { benchServe(b, app(fiber3limit.New(benchLimiter(b)))) }

// BenchmarkGlobalMiddleware is fiber3limit under app.Use among 20 routes:
// the route is looked up among the app's routes (remembered per method and path).
func BenchmarkGlobalMiddleware(b *testing.B) {
	a := fiber.New()
	a.Use(fiber3limit.New(benchLimiter(b)))
	for i := 0; i < 9; i++ {
		a.Get(fmt.Sprintf("/r%d/:id", i), func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
		a.Get(fmt.Sprintf("/s%d", i), func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	}
	a.Get("/bench", func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	benchServe(b, a)
}
