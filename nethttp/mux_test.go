package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/nethttp"
)

// TestAroundMuxServesAsTheMux: around a ServeMux, the middleware calls the
// mux's handler itself for wildcard-free patterns and leaves the rest to
// the mux; either way every request is answered as the bare mux answers
// it (status, body, Location, Allow), and handlers see the same Pattern
// and path values.
func TestAroundMuxServesAsTheMux(t *testing.T) {
	newMux := func() *http.ServeMux {
		m := http.NewServeMux()
		reply := func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "pattern=%q id=%q rest=%q x=%q", r.Pattern, r.PathValue("id"), r.PathValue("rest"), r.PathValue("x"))
		}
		for _, p := range []string{"GET /a", "POST /a", "/tree/", "GET /users/{id}", "GET /files/{rest...}",
			"GET /{$}", "example.com/host", "PUT /only-put", "GET /exact/{$}"} {
			m.HandleFunc(p, reply)
		}
		m.HandleFunc("GET /set", func(w http.ResponseWriter, r *http.Request) {
			r.SetPathValue("x", "1")
			reply(w, r)
		})
		return m
	}
	store := memstore.MustNew()
	defer store.Close()
	lim := core.MustNewLimiter(store, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(1_000_000)}})
	bare, limited := newMux(), nethttp.New(lim)(newMux())
	for _, tc := range []struct{ method, target, host string }{
		{"GET", "/a", ""}, {"HEAD", "/a", ""}, {"POST", "/a", ""}, {"DELETE", "/a", ""},
		{"GET", "/tree", ""}, {"GET", "/tree/x/y", ""}, {"GET", "/users/7", ""}, {"GET", "/users/7/", ""},
		{"GET", "/files/a/b%2Fc", ""}, {"GET", "/", ""}, {"GET", "/nope", ""}, {"GET", "/host", "example.com"},
		{"GET", "/host", "other.org"}, {"GET", "/only-put", ""}, {"GET", "/exact/", ""}, {"GET", "/exact", ""},
		{"GET", "/a/../users/3", ""}, {"GET", "//a", ""}, {"GET", "/set", ""}, {"OPTIONS", "*", ""},
		{"CONNECT", "/a", ""},
	} {
		do := func(h http.Handler) *httptest.ResponseRecorder {
			r := httptest.NewRequest(tc.method, "http://example.net"+strings.TrimPrefix(tc.target, "*"), nil)
			if tc.target == "*" {
				r.RequestURI, r.URL.Path = "*", "*"
			}
			if tc.host != "" {
				r.Host = tc.host
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		want, got := do(bare), do(limited)
		name := tc.method + " " + tc.target + " " + tc.host
		assert.Equal(t, want.Code, got.Code, name)
		assert.Equal(t, want.Body.String(), got.Body.String(), name)
		for _, k := range []string{"Location", "Allow", "Content-Type", "Connection"} {
			assert.Equal(t, want.Header().Values(k), got.Header().Values(k), "%s: %s", name, k)
		}
		if tc.target != "*" {
			require.NotEmpty(t, got.Header().Get("X-RateLimit-Remaining"), name)
		}
	}
}
