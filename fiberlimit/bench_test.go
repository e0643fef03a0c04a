package fiberlimit_test

import (
	"fmt"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/limitkit/limitkit/fiberlimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

func app(mw ...fiber.Handler) *fiber.App {
	a := fiber.New(fiber.Config{DisableStartupMessage: true})
	hs := append(mw, func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	a.Get("/bench", hs...)
	return a
}

// BenchmarkBaseline is a fiber app routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) { adaptertest.BenchFastHTTP(b, app().Handler()) }

// BenchmarkMiddleware adds fiberlimit on the route (memstore, one hot key,
// the three X-RateLimit headers).
func BenchmarkMiddleware(b *testing.B) {
	adaptertest.BenchFastHTTP(b, app(fiberlimit.New(adaptertest.BenchLimiter(b))).Handler())
}

// BenchmarkGlobalMiddleware is fiberlimit under app.Use among 20 routes:
// the route is looked up in the table built at the first request.
func BenchmarkGlobalMiddleware(b *testing.B) {
	a := fiber.New(fiber.Config{DisableStartupMessage: true})
	a.Use(fiberlimit.New(adaptertest.BenchLimiter(b)))
	for i := 0; i < 9; i++ {
		a.Get(fmt.Sprintf("/r%d/:id", i), func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
		a.Get(fmt.Sprintf("/s%d", i), func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	}
	a.Get("/bench", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	adaptertest.BenchFastHTTP(b, a.Handler())
}
