package nethttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

type rvRec struct {
	mu   sync.Mutex
	keys []string
}

func (s *rvRec) Take(_ context.Context, key string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return core.Decision{Allowed: true, Limit: p.Limits[0], Remaining: 1, Policy: p.Name}, nil
}
func (s *rvRec) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	s.keys = nil
	return k
}

func rvScope(r keyfuncs.Request) string {
	route := r.Route()
	if route == "" {
		return ""
	}
	if strings.IndexByte(route, ' ') >= 0 || route[0] != '/' {
		return route
	}
	m := r.Method()
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
	default:
		m = "OTHER"
	}
	return m + " " + route
}

// TestCachedKeyEqualsGeneralPath: a middleware with the default key and
// scope (whose keys come from the key cache) and an uncached copy (the
// default scope as a scope function) side by side get the same store key
// on every request, over routes, groups, 404s, 405s, odd methods and
// peers (written by an outside review of the key cache).
func TestCachedKeyEqualsGeneralPath(t *testing.T) {
	st := &rvRec{}
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	cached, general := nethttp.New(lim), nethttp.New(lim, nethttp.WithScopeFunc(rvScope))
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
						got := st.take()
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
						ks[i] = st.take()
					}
					if len(ks[0]) > 0 && len(ks[1]) > 0 && ks[0][0] != ks[1][0] {
						t.Fatalf("around mux %q %s %s: %q vs %q", m, p, peer, ks[0][0], ks[1][0])
					}
					total++
				}
			}
		}
	}
	t.Logf("keys compared: %d", total)
}
