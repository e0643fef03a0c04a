package adaptertest

import (
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// SerialLoop runs body b.N times on one locked OS thread, with allocation
// reporting, and reports cpu-ns/op (thread CPU time per iteration) besides
// the wall-clock ns/op.
func SerialLoop(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	start := ThreadCPU()
	for b.Loop() {
		body()
	}
	if cpu := ThreadCPU() - start; cpu > 0 && b.N > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchLimiter is the adapters' benchmark limiter: the embedded store,
// closed when b ends, and a 2^30 burst a year, so that no decision of a
// benchmark is a denial.
func BenchLimiter(b *testing.B) *core.Limiter {
	b.Helper()
	st, err := memstore.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
}

// benchWriter is a reusable ResponseWriter: the benchmark measures the
// handler, not httptest.ResponseRecorder's allocations.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// BenchWriter returns a reusable ResponseWriter that discards the body:
// clear its Header between requests. What a benchmark or an allocation
// count measures is then the handler, not httptest.ResponseRecorder.
func BenchWriter() http.ResponseWriter { return &benchWriter{h: http.Header{}} }

// BenchHTTP benchmarks h serving GET http://example.com/bench from one
// client address (one hot key), as sub-benchmarks "serial" (SerialLoop)
// and "parallel" (RunParallel), each goroutine reusing its request and
// writer; serial fails unless the last answer was 200.
func BenchHTTP(b *testing.B, h http.Handler) {
	b.Helper()
	newReq := func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/bench", nil)
		r.RemoteAddr = "203.0.113.7:40001"
		return r
	}
	b.Run("serial", func(b *testing.B) {
		r, w := newReq(), &benchWriter{h: http.Header{}}
		SerialLoop(b, func() {
			clear(w.h)
			r.Pattern = "" // as a new request: a ServeMux sets it
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
				r.Pattern = ""
				h.ServeHTTP(w, r)
			}
		})
	})
}

// newFastCtx is a GET /bench on host example.com from one client address.
func newFastCtx() *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(http.MethodGet)
	req.SetRequestURI("/bench")
	req.Header.SetHost("example.com")
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40001}, nil)
	return ctx
}

// BenchFastHTTP is BenchHTTP for a fasthttp handler (a fiber app's
// Handler()), on a reused RequestCtx per goroutine, as fasthttp's server
// does per connection.
func BenchFastHTTP(b *testing.B, h fasthttp.RequestHandler) {
	b.Helper()
	b.Run("serial", func(b *testing.B) {
		ctx := newFastCtx()
		SerialLoop(b, func() {
			ctx.Response.Reset()
			h(ctx)
		})
		if ctx.Response.StatusCode() != http.StatusOK {
			b.Fatalf("status %d", ctx.Response.StatusCode())
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := newFastCtx()
			for pb.Next() {
				ctx.Response.Reset()
				h(ctx)
			}
		})
	})
}
