package nethttp_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"net/http"
	"testing"

	"github.com/limitkit/limitkit/internal/adaptertest"
	"github.com/limitkit/limitkit/nethttp"
)

var trivial = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// BenchmarkBaseline is a ServeMux routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", trivial)
	adaptertest.BenchHTTP(b, mux)
}

// BenchmarkPerRoute is the baseline with the middleware wrapped around the
// route's handler (memstore, one hot key, the three X-RateLimit headers).
func BenchmarkPerRoute(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", nethttp.New(adaptertest.BenchLimiter(b))(trivial))
	adaptertest.BenchHTTP(b, mux)
}

// BenchmarkGlobal is the baseline with the middleware around the whole
// mux; it also resolves the route pattern (ServeMux.Handler).
func BenchmarkGlobal(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", trivial)
	adaptertest.BenchHTTP(b, nethttp.New(adaptertest.BenchLimiter(b))(mux))
}

// BenchmarkPerRouteDelta is BenchmarkPerRoute with delta resets: no clock
// read of its own (the limiter still reads the clock once).
func BenchmarkPerRouteDelta(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /bench", nethttp.New(adaptertest.BenchLimiter(b), httplimit.WithResetDelta())(trivial))
	adaptertest.BenchHTTP(b, mux)
}
