package echolimit_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

func server(mw ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mw...)
	e.GET("/bench", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	return e
}

// BenchmarkBaseline is an echo server routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) { adaptertest.BenchHTTP(b, server()) }

// BenchmarkMiddleware adds echolimit (memstore, one hot key, the three
// X-RateLimit headers).
func BenchmarkMiddleware(b *testing.B) {
	adaptertest.BenchHTTP(b, server(echolimit.New(adaptertest.BenchLimiter(b))))
}
