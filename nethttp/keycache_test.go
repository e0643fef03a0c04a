package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/nethttp"
)

// realIP mimics chi's middleware.RealIP / gorilla's ProxyHeaders: it sets
// r.RemoteAddr to the first X-Forwarded-For element, a substring of the
// header value (net/textproto allocates each value on its own).
func realIP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		xff := r.Header.Get("X-Forwarded-For")
		if i := strings.IndexByte(xff, ','); i > 0 {
			r.RemoteAddr = xff[:i]
		}
		next.ServeHTTP(w, r)
	})
}

// TestKeyCacheKeepsNoRequestMemory: a RemoteAddr cut from a large header
// value (a real-IP middleware) is copied into the key cache, not held: a
// held substring would pin the whole 256 KiB value, once per request.
// Fails on a cache that keeps the request's strings (an outside review
// found that one).
func TestKeyCacheKeepsNoRequestMemory(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	lim := core.MustNewLimiter(store, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(1_000_000)}})
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := realIP(nethttp.New(lim)(ok))
	pad := strings.Repeat("9.9.9.9, ", 256<<10/9)
	run := func(n int) {
		for i := 0; i < n; i++ {
			for range 2 { // a returning client: the second request makes an entry
				r := httptest.NewRequest("GET", "/", nil)
				// a fresh value per request, as textproto makes it
				r.Header.Set("X-Forwarded-For", fmt.Sprintf("10.0.%d.%d, ", i>>8&255, i&255)+pad)
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	run(200)
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d MiB after 200 requests", grown>>20)
	if grown > 16<<20 {
		t.Fatalf("200 requests left %d MiB reachable: the key cache pins request memory", grown>>20)
	}
}
