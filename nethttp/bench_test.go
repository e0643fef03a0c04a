package nethttp_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"net/http"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/internal/adaptertest"
	"github.com/limitkit/limitkit/nethttp"
)

// benchWriter is a reusable ResponseWriter: the benchmark measures the
// middleware, not httptest.ResponseRecorder's allocations.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// benchLimiter never denies during a benchmark: a 2^30 burst.
func benchLimiter(b *testing.B) *core.Limiter {
	b.Helper()
	st, err := memstore.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
}

var trivial = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func benchServe(b *testing.B, h http.Handler) {
	b.Helper()
	newReq := func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/bench", nil)
		r.RemoteAddr = "203.0.113.7:40001" // one hot key
		return r
	}
	b.Run("serial", func(b *testing.B) {
		r, w := newReq(), &benchWriter{h: http.Header{}}
		adaptertest.SerialLoop(b, func() {
			clear(w.h)
			r.Pattern = ""
			h.ServeHTTP(w, r)
		})
		if w.code != http.StatusOK || w.h.Get("X-RateLimit-Remaining") == "" && w.h.Get("X-Bench") != "" {
			b.Fatalf("status %d", w.code)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r, w := newReq(), &benchWriter{h: http.Header{}}
			for pb.Next() {
				clear(w.h)
				r.Pattern = ""
				h.ServeHTTP(w, r)
			}
		})
	})
}

// BenchmarkBaseline is a ServeMux routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", trivial)
	benchServe(b, mux)
}

// BenchmarkPerRoute is the baseline with the middleware wrapped around the
// route's handler (memstore, one hot key, the three X-RateLimit headers).
func BenchmarkPerRoute(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", nethttp.New(benchLimiter(b))(trivial))
	benchServe(b, mux)
}

// BenchmarkGlobal is the baseline with the middleware around the whole
// mux; it also resolves the route pattern (ServeMux.Handler).
func BenchmarkGlobal(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", trivial)
	benchServe(b, nethttp.New(benchLimiter(b))(mux))
}

// BenchmarkPerRouteDelta is BenchmarkPerRoute with delta resets: no clock
// read of its own (the limiter still reads the clock once).
func BenchmarkPerRouteDelta(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", nethttp.New(benchLimiter(b), httplimit.WithResetDelta())(trivial))
	benchServe(b, mux)
}
