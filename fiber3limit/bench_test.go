package fiber3limit_test

import (
	"fmt"
	"testing"

	"github.com/gofiber/fiber/v3"

	"github.com/limitkit/limitkit/fiber3limit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

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
func BenchmarkBaseline(b *testing.B) { adaptertest.BenchFastHTTP(b, app().Handler()) }

// BenchmarkMiddleware adds fiber3limit on the route (memstore, one hot key,
// the three X-RateLimit headers).
func BenchmarkMiddleware(b *testing.B) {
	adaptertest.BenchFastHTTP(b, app(fiber3limit.New(adaptertest.BenchLimiter(b))).Handler())
}

// BenchmarkGlobalMiddleware is fiber3limit under app.Use among 20 routes:
// the route is looked up among the app's routes (remembered per method and path).
func BenchmarkGlobalMiddleware(b *testing.B) {
	a := fiber.New()
	a.Use(fiber3limit.New(adaptertest.BenchLimiter(b)))
	for i := 0; i < 9; i++ {
		a.Get(fmt.Sprintf("/r%d/:id", i), func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
		a.Get(fmt.Sprintf("/s%d", i), func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	}
	a.Get("/bench", func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	adaptertest.BenchFastHTTP(b, a.Handler())
}
