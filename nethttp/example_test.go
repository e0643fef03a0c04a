package nethttp_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// show serves one request from peer and prints the status and the
// rate-limit headers.
func show(h http.Handler, method, target, peer string, hdr ...string) {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Printf("%s %s -> %d", method, target, w.Code)
	for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "RateLimit-Policy", "RateLimit"} {
		if v := w.Header().Get(k); v != "" {
			fmt.Printf(" %s=%s", k, v)
		}
	}
	fmt.Println()
}

// A global limit: the middleware wraps the whole mux. Each endpoint still
// gets its own quota per client (keys carry the route pattern), and
// X-RateLimit-Reset is the Unix time at which the quota is full again.
func ExampleNew() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0)) // a real server omits the clocks
	store := memstore.MustNew()
	defer store.Close()
	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "user", r.PathValue("id")) })
	handler := nethttp.New(api, httplimit.WithClock(clock))(mux)

	show(handler, "GET", "/users/1", "203.0.113.7:1234")
	show(handler, "GET", "/users/2", "203.0.113.7:1234")
	show(handler, "GET", "/users/3", "203.0.113.7:1234")
	show(handler, "GET", "/users/3", "198.51.100.9:1234") // another client
	// Output:
	// GET /users/1 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=1700000030
	// GET /users/2 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060
	// GET /users/3 -> 429 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060 Retry-After=30
	// GET /users/3 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=1700000030
}

// A per-route limit: only the login handler is wrapped. Here with delta
// resets and the IETF draft fields.
func ExampleNew_perRoute() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	login := core.MustNewLimiter(store, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(1)}}, core.WithClock(clock))

	mux := http.NewServeMux()
	mux.Handle("POST /login", nethttp.New(login,
		httplimit.WithResetDelta(),
		httplimit.WithHeaders(httplimit.HeaderDefault|httplimit.HeaderIETF),
	)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "welcome") })))
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "home") })

	show(mux, "POST", "/login", "203.0.113.7:1234")
	show(mux, "POST", "/login", "203.0.113.7:1234")
	show(mux, "GET", "/", "203.0.113.7:1234") // not limited
	// Output:
	// POST /login -> 200 X-RateLimit-Limit=1 X-RateLimit-Remaining=0 X-RateLimit-Reset=60 RateLimit-Policy="login";q=1;w=60 RateLimit="login";r=0;t=60
	// POST /login -> 429 X-RateLimit-Limit=1 X-RateLimit-Remaining=0 X-RateLimit-Reset=60 Retry-After=60 RateLimit-Policy="login";q=1;w=60 RateLimit="login";r=0;t=60
	// GET / -> 200
}

// The hybrid of the design notes: a logged-in user is limited per user and
// per IP; an anonymous request (no user key) by its IP alone.
func ExampleWithCheck() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	perUser := core.MustNewLimiter(store, core.Policy{Name: "user", Limits: []core.Limit{core.PerMinute(200)}}, core.WithClock(clock))
	perIP := core.MustNewLimiter(store, core.Policy{Name: "ip", Limits: []core.Limit{core.PerMinute(50)}}, core.WithClock(clock))
	// In production the user key comes from verified credentials
	// (keyfuncs.JWTClaim, or the principal an auth middleware stored);
	// a plain header stands in for it here.
	user, _ := keyfuncs.Header("X-User")

	mw := nethttp.New(perUser,
		httplimit.WithKey(user),
		httplimit.WithNoKeySkip(),       // anonymous: IP check only
		httplimit.WithCheck(perIP, nil), // nil: key by the peer IP
		httplimit.WithResetDelta(),
	)
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	show(h, "GET", "/api1", "203.0.113.7:1234", "X-User", "alice") // the IP check binds: 49 left
	show(h, "GET", "/api1", "198.51.100.9:1234")                   // anonymous
	// Output:
	// GET /api1 -> 200 X-RateLimit-Limit=50 X-RateLimit-Remaining=49 X-RateLimit-Reset=2
	// GET /api1 -> 200 X-RateLimit-Limit=50 X-RateLimit-Remaining=49 X-RateLimit-Reset=2
}
