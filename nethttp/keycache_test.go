package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"unsafe"

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
			r := httptest.NewRequest("GET", "/", nil)
			// a fresh value per request, as textproto makes it
			r.Header.Set("X-Forwarded-For", fmt.Sprintf("10.0.%d.%d, ", i>>8&255, i&255)+pad)
			h.ServeHTTP(httptest.NewRecorder(), r)
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

// TestKeyCacheMutableRemoteAddr: a RemoteAddr that is a view of a reused
// buffer (fasthttpadaptor's b2s header strings, then a RealIP
// middleware): were the cache to hold it, rewriting the buffer for the
// next client would make the entry match that client and charge it to
// the first.
func TestKeyCacheMutableRemoteAddr(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	lim := core.MustNewLimiter(store, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(2)}})
	buf := make([]byte, 16) // the reused per-connection header buffer
	var status []int
	h := nethttp.New(lim)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	do := func(ip string) int {
		n := copy(buf, ip)
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = unsafe.String(&buf[0], n)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	status = append(status, do("10.0.0.1:1"), do("10.0.0.1:1"))
	// a different client: its own fresh quota of 2
	got := do("10.0.0.2:2")
	if got != http.StatusOK {
		t.Fatalf("10.0.0.2 denied (%d) after 10.0.0.1 spent its quota %v: charged to 10.0.0.1's key", got, status)
	}
}
