package echo5limit_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/limitkit/limitkit/echo5limit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

func server(mw ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mw...)
	e.GET("/bench", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	return e
}

// BenchmarkBaseline is an echo server routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) { adaptertest.BenchHTTP(b, server()) }

// BenchmarkMiddleware adds echo5limit (memstore, one hot key, the three
// X-RateLimit headers).
func BenchmarkMiddleware(b *testing.B) {
	adaptertest.BenchHTTP(b, server(echo5limit.New(adaptertest.BenchLimiter(b))))
}
