package benchmarks

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	tollbooth "github.com/didip/tollbooth/v7"
	tblimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/gin-gonic/gin"
	"github.com/go-chi/httprate"
	"github.com/gofiber/fiber/v2"
	fiberlimiter "github.com/gofiber/fiber/v2/middleware/limiter"
	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"
	ulule "github.com/ulule/limiter/v3"
	ulugin "github.com/ulule/limiter/v3/drivers/middleware/gin"
	ulustd "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ulumem "github.com/ulule/limiter/v3/drivers/store/memory"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/fiberlimit"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/nethttp"
)

// The middleware benchmarks serve GET /api1 from one client IP through
// each framework: without a limiter (the baseline), with limitkit's
// adapter (embedded store, key = peer IP, the default headers), and with
// the framework's or a peer's own limiter. The difference to the baseline
// is the middleware's overhead.

func kitLimiter(b *testing.B) *core.Limiter {
	st := must(memstore.New())
	b.Cleanup(func() { st.Close() })
	return must(core.NewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(quota, quotaWin)}}))
}

// resetWriter is a ResponseWriter whose header map is cleared per request,
// so the loop does not allocate a recorder per op.
type resetWriter struct {
	h    http.Header
	code int
}

func (w *resetWriter) Header() http.Header         { return w.h }
func (w *resetWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *resetWriter) WriteHeader(c int)           { w.code = c }

func serveLoop(b *testing.B, h http.Handler) {
	b.Helper()
	r := httptest.NewRequest("GET", "/api1", nil)
	r.RemoteAddr = "203.0.113.7:40000"
	w := &resetWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	if w.code != 0 && w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, r)
	}
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func BenchmarkMiddlewareNetHTTP(b *testing.B) {
	mux := func() *http.ServeMux { m := http.NewServeMux(); m.HandleFunc("GET /api1", ok); return m }
	b.Run("lib=none", func(b *testing.B) { serveLoop(b, mux()) })
	b.Run("lib=limitkit", func(b *testing.B) { serveLoop(b, nethttp.New(kitLimiter(b))(mux())) })
	b.Run("lib=httprate", func(b *testing.B) { serveLoop(b, httprate.LimitByIP(quota, quotaWin)(mux())) })
	b.Run("lib=tollbooth", func(b *testing.B) {
		l := tollbooth.NewLimiter(perSecond, &tblimiter.ExpirableOptions{DefaultExpirationTTL: quotaWin}).SetBurst(quota)
		serveLoop(b, tollbooth.LimitHandler(l, mux()))
	})
	b.Run("lib=ulule", func(b *testing.B) {
		l := ulule.New(ulumem.NewStore(), ulule.Rate{Period: quotaWin, Limit: quota})
		serveLoop(b, ulustd.NewMiddleware(l).Handler(mux()))
	})
}

func BenchmarkMiddlewareGin(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	engine := func(mw ...gin.HandlerFunc) *gin.Engine {
		e := gin.New()
		e.Use(mw...)
		e.GET("/api1", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
		return e
	}
	b.Run("lib=none", func(b *testing.B) { serveLoop(b, engine()) })
	b.Run("lib=limitkit", func(b *testing.B) { serveLoop(b, engine(ginlimit.New(kitLimiter(b)))) })
	b.Run("lib=ulule", func(b *testing.B) {
		l := ulule.New(ulumem.NewStore(), ulule.Rate{Period: quotaWin, Limit: quota})
		serveLoop(b, engine(ulugin.NewMiddleware(l)))
	})
}

func BenchmarkMiddlewareEcho(b *testing.B) {
	server := func(mw ...echo.MiddlewareFunc) *echo.Echo {
		e := echo.New()
		e.Use(mw...)
		e.GET("/api1", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
		return e
	}
	b.Run("lib=none", func(b *testing.B) { serveLoop(b, server()) })
	b.Run("lib=limitkit", func(b *testing.B) { serveLoop(b, server(echolimit.New(kitLimiter(b)))) })
	b.Run("lib=echo", func(b *testing.B) {
		st := echomw.NewRateLimiterMemoryStoreWithConfig(echomw.RateLimiterMemoryStoreConfig{Rate: rate.Limit(perSecond), Burst: quota, ExpiresIn: quotaWin})
		serveLoop(b, server(echomw.RateLimiter(st)))
	})
}

func BenchmarkMiddlewareFiber(b *testing.B) {
	run := func(b *testing.B, mw ...fiber.Handler) {
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		for _, m := range mw {
			app.Use(m)
		}
		app.Get("/api1", func(c *fiber.Ctx) error { return c.SendString("ok") })
		h := app.Handler()
		var req fasthttp.Request
		req.Header.SetMethod("GET")
		req.SetRequestURI("/api1")
		var fctx fasthttp.RequestCtx
		fctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40000}, nil)
		h(&fctx)
		if c := fctx.Response.StatusCode(); c != http.StatusOK {
			b.Fatalf("status %d", c)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			fctx.Response.Reset()
			h(&fctx)
		}
	}
	b.Run("lib=none", func(b *testing.B) { run(b) })
	b.Run("lib=limitkit", func(b *testing.B) { run(b, fiberlimit.New(kitLimiter(b))) })
	b.Run("lib=fiber", func(b *testing.B) {
		run(b, fiberlimiter.New(fiberlimiter.Config{Max: quota, Expiration: time.Hour, LimiterMiddleware: fiberlimiter.SlidingWindow{}}))
	})
}
