package echo5limit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/echo5limit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

func benchLimiter(b *testing.B) *core.Limiter {
	b.Helper()
	st, err := memstore.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
}

func benchServe(b *testing.B, h http.Handler) {
	b.Helper()
	newReq := func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/bench", nil)
		r.RemoteAddr = "203.0.113.7:40001"
		return r
	}
	b.Run("serial", func(b *testing.B) {
		r, w := newReq(), &benchWriter{h: http.Header{}}
		adaptertest.SerialLoop(b, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r, w := newReq(), &benchWriter{h: http.Header{}}
			for pb.Next() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	})
}

func server(mw ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mw...)
	e.GET("/bench", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	return e
}

// BenchmarkBaseline is an echo server routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) { benchServe(b, server()) }

// BenchmarkMiddleware adds echo5limit (memstore, one hot key, the three
// X-RateLimit headers).
func BenchmarkMiddleware(b *testing.B) { benchServe(b, server(echo5limit.New(benchLimiter(b)))) }
