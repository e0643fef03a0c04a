package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/keytest"
	"github.com/limitkit/limitkit/nethttp"
)

// TestCachedKeyEqualsGeneralPath: a middleware with the default key and
// scope (whose keys come from the key cache) and an uncached copy (the
// default scope as a scope function) side by side get the same store key
// on every request, over routes, groups, 404s, 405s, odd methods and
// peers (written by an outside review of the key cache).
func TestCachedKeyEqualsGeneralPath(t *testing.T) {
	st := &keytest.Rec{}
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	cached, general := nethttp.New(lim), nethttp.New(lim, httplimit.WithScopeFunc(keytest.Scope))
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	both := func(h http.Handler) http.Handler { return cached(general(h)) }
	mux := http.NewServeMux()
	mux.Handle("GET /users/{id}", both(nop))
	mux.Handle("/plain/", both(nop))
	mux.Handle("example.com/host", both(nop))
	mux.Handle("/{$}", both(nop))
	// around the mux: the outer middleware sees the mux; the inner one too
	outerC, outerG := cached(mux), general(mux)
	total := 0
	for round := 0; round < 3; round++ {
		for _, m := range []string{"GET", "", "POST", "FOO", "HEAD"} {
			for _, p := range []string{"/users/1", "/users/1/", "/plain/x", "/plain", "/host", "/", "/nope"} {
				for _, peer := range []string{"203.0.113.7:1", "203.0.113.7:2", "203.0.113.7", "[2001:db8::1]:3", "", "1.2.3.4:99999"} {
					for _, h := range []http.Handler{mux, outerC, outerG} {
						r := httptest.NewRequest("GET", "http://example.com"+p, nil)
						r.Method = m
						r.RemoteAddr = peer
						h.ServeHTTP(httptest.NewRecorder(), r)
						got := st.Keys()
						if h == outerC || h == outerG {
							continue
						}
						total += len(got) / 2
						if len(got)%2 != 0 {
							t.Fatalf("%v", got)
						}
						for i := 0; i < len(got); i += 2 {
							if got[i] != got[i+1] {
								t.Fatalf("%q %s %s: cached %q general %q", m, p, peer, got[i], got[i+1])
							}
						}
					}
					// around the mux: compare outer cached vs outer general
					var ks [2][]string
					for i, h := range []http.Handler{outerC, outerG} {
						r := httptest.NewRequest("GET", "http://example.com"+p, nil)
						r.Method = m
						r.RemoteAddr = peer
						h.ServeHTTP(httptest.NewRecorder(), r)
						ks[i] = st.Keys()
					}
					if peer == "" || peer == "1.2.3.4:99999" { // no key: denied before the store
						continue
					}
					if len(ks[0]) == 0 || len(ks[1]) == 0 {
						t.Fatalf("around mux %q %s %s: reached no store (cached %q, general %q)", m, p, peer, ks[0], ks[1])
					}
					if ks[0][0] != ks[1][0] {
						t.Fatalf("around mux %q %s %s: %q vs %q", m, p, peer, ks[0][0], ks[1][0])
					}
					total++
				}
			}
		}
	}
	t.Logf("keys compared: %d", total)
	// at least the requests around the mux from a keyable peer: 3 rounds
	// × 5 methods × 7 paths × 4 peers (the mux's own routes add more)
	if total < 3*5*7*4 {
		t.Fatalf("only %d keys compared", total)
	}
}
