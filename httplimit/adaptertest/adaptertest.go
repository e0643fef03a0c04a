// Package adaptertest is the conformance suite for a limitkit HTTP
// adapter written anywhere, beside core/storetest for stores: an adapter
// package describes how to build an app with its framework in a
// [Harness] and calls [Run] from a test. The suite drives requests
// through the app and checks the contract every adapter of this module
// keeps:
//
//   - one quota per client per route (the default scope is the route's
//     method and pattern: "GET /users/:id"), counted once per request;
//   - a route that accepts every method (gin's r.Any, echo's e.Any,
//     fiber's app.All, a net/http pattern without a method) has ONE quota
//     per client, whatever the method: an adapter that does not tell the
//     engine so (see httplimit.Request) hands a client one quota
//     per method, nine times the limit, and fails here;
//   - a GET route serves HEAD on the GET quota;
//   - a denial is 429 with Retry-After and the X-RateLimit headers, and a
//     deny handler, when the adapter has one, replaces it.
//
// Everything runs on a manual clock and an in-memory store: no network,
// no sleeps. The suite is safe to run in parallel with other tests; each
// scenario builds its own app.
package adaptertest

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/httplimit"
)

// Mw is one middleware: a limiter and options.
type Mw struct {
	Limiter *core.Limiter
	Opts    []httplimit.Option
}

// Route is one endpoint. Path uses the ":param" syntax; harnesses
// convert it to their framework's. Method is one method, or [AnyMethod]
// or [GetHead].
type Route struct {
	Method, Path string
	Mw           *Mw // per-route middleware, or nil
}

// Route methods that harnesses register the framework's own way.
const (
	// AnyMethod is a route for every method: a net/http pattern without a
	// method, gin's r.Any, echo's e.Any, fiber's app.All.
	AnyMethod = "*"
	// GetHead is a GET route that serves HEAD too: a net/http "GET /x"
	// pattern (which serves HEAD), gin's r.GET and r.HEAD, echo's e.GET
	// and e.HEAD, fiber's app.Get (which registers HEAD).
	GetHead = "GET+HEAD"
)

// App is what a harness builds: the global middleware (around every
// route, or nil) and the routes. Every route answers 200 "ok" to the
// requests this package sends.
type App struct {
	Global *Mw
	Routes []Route
}

// Request is one request to an app.
type Request struct {
	Method, Target string
	Peer           string // "ip:port": the TCP peer the server sees
	Header         map[string]string
	Body           string // the request body, none when empty
}

// Response is what came back. Header keys are canonical.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Harness adapts one framework to the suite.
type Harness struct {
	// Name names the framework in subtests.
	Name string
	// Build builds the app with the framework and the adapter: the
	// global middleware around every route, each route's own middleware
	// in front of its handler, and a client serving one request against
	// it (the client must not panic). Required.
	Build func(App) (func(Request) Response, error)
	// Scope is the default key scope the adapter derives for a route
	// (method, ":param" path): "GET /users/:id", or for net/http
	// "GET /users/{id}"; for a route of every method (method "") the
	// path alone. Required.
	Scope func(method, path string) string
	// CustomDeny is the adapter's WithDenyHandler with this handler:
	// status 418, header X-Denied: <reason>, body
	// "denied:<reason>:<policy>:<retry>". Nil when the adapter has none;
	// that scenario is then skipped.
	CustomDeny func() httplimit.Option
}

// peer is the client of every request; peerIP is its key.
const (
	peer   = "192.0.2.7:5000"
	peerIP = "192.0.2.7"
)

// Run checks h's adapter against the contract (see the package doc),
// each scenario a subtest of t named for h.Name.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Build == nil || h.Scope == nil {
		t.Fatalf("adaptertest: harness %q needs Build and Scope", h.Name)
	}
	for _, sc := range scenarios {
		t.Run(h.Name+"/"+sc.name, func(t *testing.T) { sc.run(t, h) })
	}
}

// step is one request and what must come back: the status and, for a
// request that reached the limiter, the store key it took.
type step struct {
	method, target string
	status         int
	key            string // "" when the limiter must not be asked
}

type scenario struct {
	name string
	run  func(t *testing.T, h Harness)
}

var scenarios = []scenario{
	{"route quotas", func(t *testing.T, h Harness) {
		env, lim := newEnv(t, 2)
		get, post, user := h.Scope("GET", "/a"), h.Scope("POST", "/a"), h.Scope("GET", "/users/:id")
		play(t, h, env, App{Global: &Mw{Limiter: lim}, Routes: []Route{
			{Method: "GET", Path: "/a"}, {Method: "POST", Path: "/a"}, {Method: "GET", Path: "/users/:id"},
		}}, []step{
			{"GET", "/a", 200, get}, {"GET", "/a", 200, get}, {"GET", "/a", 429, get},
			{"POST", "/a", 200, post}, // another route: its own quota
			{"GET", "/users/1", 200, user}, {"GET", "/users/2", 200, user}, {"GET", "/users/3", 429, user},
		})
	}},
	{"any-method route has one quota", func(t *testing.T, h Harness) {
		for _, where := range []string{"global", "route"} {
			env, lim := newEnv(t, 3)
			any := h.Scope("", "/any")
			app := App{Global: &Mw{Limiter: lim}, Routes: []Route{{Method: AnyMethod, Path: "/any"}}}
			if where == "route" {
				app = App{Routes: []Route{{Method: AnyMethod, Path: "/any", Mw: &Mw{Limiter: lim}}}}
			}
			play(t, h, env, app, []step{
				{"GET", "/any", 200, any}, {"POST", "/any", 200, any}, {"PUT", "/any", 200, any},
				{"DELETE", "/any", 429, any}, {"PATCH", "/any", 429, any}, {"GET", "/any", 429, any},
			})
		}
	}},
	{"GET route serves HEAD on its quota", func(t *testing.T, h Harness) {
		env, lim := newEnv(t, 2)
		get := h.Scope("GET", "/gh")
		play(t, h, env, App{Global: &Mw{Limiter: lim}, Routes: []Route{{Method: GetHead, Path: "/gh"}}}, []step{
			{"GET", "/gh", 200, get}, {"HEAD", "/gh", 200, get}, {"HEAD", "/gh", 429, get}, {"GET", "/gh", 429, get},
		})
	}},
	{"deny handler", func(t *testing.T, h Harness) {
		if h.CustomDeny == nil {
			t.Skip("the adapter has no deny handler")
		}
		_, lim := newEnv(t, 1)
		app := App{Global: &Mw{Limiter: lim, Opts: []httplimit.Option{h.CustomDeny()}}, Routes: []Route{{Method: "GET", Path: "/d"}}}
		c := build(t, h, app)
		_ = c(Request{Method: "GET", Target: "/d", Peer: peer})
		r := c(Request{Method: "GET", Target: "/d", Peer: peer})
		if r.Status != http.StatusTeapot || r.Header.Get("X-Denied") != "limited" || r.Body != "denied:limited:p:60" {
			t.Fatalf("denial through the deny handler = %d %q %q, want 418 X-Denied: limited, body denied:limited:p:60",
				r.Status, r.Header.Get("X-Denied"), r.Body)
		}
		if r.Header.Get("Retry-After") != "60" {
			t.Fatalf("Retry-After before the deny handler = %q, want 60", r.Header.Get("Retry-After"))
		}
	}},
}

// newEnv returns a recording store on a manual clock and a limiter of n
// requests a minute ("p") on it.
func newEnv(t *testing.T, n int64) (*recStore, *core.Limiter) {
	t.Helper()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	ms, err := memstore.New(memstore.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Close() })
	rs := &recStore{inner: ms}
	lim, err := core.NewLimiter(rs, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(n)}}, core.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return rs, lim
}

func build(t *testing.T, h Harness, app App) func(Request) Response {
	t.Helper()
	c, err := h.Build(app)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return c
}

// play sends the steps in order and checks each status, the store key
// taken, and on a denial the headers a client retries by.
func play(t *testing.T, h Harness, env *recStore, app App, steps []step) {
	t.Helper()
	c := build(t, h, app)
	for i, s := range steps {
		r := c(Request{Method: s.method, Target: s.target, Peer: peer})
		if r.Status != s.status {
			t.Fatalf("step %d: %s %s = %d, want %d", i, s.method, s.target, r.Status, s.status)
		}
		keys := env.take()
		var want []string
		if s.key != "" {
			want = append(want, httplimit.StoreKey(s.key, peerIP))
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("step %d: %s %s took store keys %q, want %q (one key per request, the route's scope)",
				i, s.method, s.target, keys, want)
		}
		if s.status == http.StatusTooManyRequests {
			if r.Header.Get("Retry-After") == "" || r.Header.Get("X-Ratelimit-Limit") == "" || r.Header.Get("X-Ratelimit-Remaining") != "0" {
				t.Fatalf("step %d: denial headers %v, want Retry-After, X-RateLimit-Limit and X-RateLimit-Remaining: 0", i, r.Header)
			}
		}
	}
}

// recStore is a core.Store that records every key taken and forwards to
// a memstore.
type recStore struct {
	inner core.Store
	mu    sync.Mutex
	keys  []string
}

var _ storekit.LocalStore = (*recStore)(nil)

func (s *recStore) Local() bool { return true }

func (s *recStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.inner.Take(ctx, key, p, now, cost)
}

// take returns and forgets the keys recorded so far.
func (s *recStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	s.keys = nil
	return k
}
