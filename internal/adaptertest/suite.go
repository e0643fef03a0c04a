package adaptertest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Watched are the header fields the suite compares exactly: present with
// the expected value, or absent.
var Watched = []string{
	"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
	"Retry-After", "Ratelimit-Policy", "Ratelimit", "X-Ratelimit-Degraded", "X-Denied",
}

// Peers used by the scenarios.
const (
	Peer1 = "203.0.113.7:40001"
	Peer2 = "198.51.100.9:40002"
	IP1   = "203.0.113.7"
	IP2   = "198.51.100.9"
)

// H is an expected set of watched headers; a watched name not in it must
// be absent.
type H map[string]string

// Step is one request and what must come back.
type Step struct {
	Advance time.Duration // moved on the clock before the request
	Req     Request
	Status  int
	Header  H
	Body    string   // exact when non-empty
	Problem string   // default problem+json denial for this policy, when non-empty
	Keys    []string // "policy#key" the store was asked for, in order
}

// ProblemBody is the default 429 body for policy.
func ProblemBody(status int, policy string) string {
	return `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",` +
		`"title":"Request cannot be satisfied as assigned quota has been exceeded",` +
		`"status":` + strconv.Itoa(status) + `,"violated-policies":["` + policy + `"]}`
}

// UnavailableBody is the 503 body.
const UnavailableBody = `{"type":"about:blank","title":"Service Unavailable","status":503}`

// NoKeyBody is the 403 body of a no-key denial: no quota, no policy.
const NoKeyBody = `{"type":"about:blank","title":"Forbidden","status":403,"detail":"The request carries no client identity to rate-limit it by."}`

// XRL is the X-RateLimit triple (epoch reset as an offset from T0).
func XRL(limit, remaining int64, resetFromT0 time.Duration) H {
	return H{
		"X-Ratelimit-Limit":     strconv.FormatInt(limit, 10),
		"X-Ratelimit-Remaining": strconv.FormatInt(remaining, 10),
		"X-Ratelimit-Reset":     strconv.FormatInt(T0.Add(resetFromT0).Unix(), 10),
	}
}

// With returns h plus kv pairs.
func (h H) With(kv ...string) H {
	out := H{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func get(target, peer string, kv ...string) Request {
	return method(http.MethodGet, target, peer, kv...)
}

func method(m, target, peer string, kv ...string) Request {
	r := Request{Method: m, Target: target, Peer: peer, Header: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header[kv[i]] = kv[i+1]
	}
	return r
}

// Play runs steps against c, checking each.
func Play(t *testing.T, env *Env, c Client, steps []Step) {
	t.Helper()
	env.Store.Keys()
	for i, s := range steps {
		env.Clock.Advance(s.Advance)
		resp := c(s.Req)
		keys := env.Store.Keys()
		require.Equalf(t, s.Status, resp.Status, "step %d %s %s: status (body %q)", i, s.Req.Method, s.Req.Target, resp.Body)
		got := H{}
		for _, name := range Watched {
			if v := resp.Header.Values(name); len(v) > 0 {
				assert.Lenf(t, v, 1, "step %d: %s repeated", i, name)
				got[name] = v[0]
			}
		}
		want := s.Header
		if want == nil {
			want = H{}
		}
		assert.Equalf(t, want, got, "step %d %s %s: headers", i, s.Req.Method, s.Req.Target)
		switch {
		case s.Problem != "":
			assert.Equalf(t, ProblemBody(s.Status, s.Problem), resp.Body, "step %d: body", i)
			assert.Equalf(t, "application/problem+json", resp.Header.Get("Content-Type"), "step %d: content type", i)
		case s.Body != "":
			assert.Equalf(t, s.Body, resp.Body, "step %d: body", i)
			if strings.HasPrefix(s.Body, `{"type":`) {
				assert.Equalf(t, "application/problem+json", resp.Header.Get("Content-Type"), "step %d: content type", i)
			}
		}
		assert.Equalf(t, s.Keys, keys, "step %d: store keys", i)
	}
}

func policy(name string, limits ...core.Limit) core.Policy {
	return core.Policy{Name: name, Limits: limits}
}

// Run drives every scenario through each harness.
func Run(t *testing.T, hs ...Harness) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, h := range hs {
				t.Run(h.Name, func(t *testing.T) {
					env := NewEnv(t)
					sc.run(t, h, env)
				})
			}
		})
	}
}

type scenario struct {
	name string
	run  func(t *testing.T, h Harness, env *Env)
}

func build(t *testing.T, h Harness, app App) Client {
	t.Helper()
	c, err := h.Build(app)
	require.NoError(t, err)
	return c
}

func mw(l *core.Limiter, opts ...httplimit.Option) *Mw { return &Mw{Limiter: l, Opts: opts} }

// oneRoute builds an app of the one route rt limited by p on the env's
// clock, by a global middleware or by the route's own.
func oneRoute(t *testing.T, h Harness, env *Env, global bool, p core.Policy, rt Route) Client {
	t.Helper()
	m := mw(env.Limiter(t, p), httplimit.WithClock(env.Clock))
	app := App{Routes: []Route{rt}}
	if global {
		app.Global = m
	} else {
		app.Routes[0].Mw = m
	}
	return build(t, h, app)
}

var scenarios = []scenario{
	{"GlobalLimit", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("global", core.PerMinute(2)))
		c := build(t, h, App{
			Global: mw(l, httplimit.WithClock(env.Clock)),
			Routes: []Route{{Method: "GET", Path: "/a"}, {Method: "GET", Path: "/b"}},
		})
		ka := "global#" + h.Scope("GET", "/a") + "|" + IP1
		kb := "global#" + h.Scope("GET", "/b") + "|" + IP1
		k2 := "global#" + h.Scope("GET", "/a") + "|" + IP2
		steps := []Step{
			{Req: get("/a", Peer1), Status: 200, Body: "ok", Header: XRL(2, 1, 30*time.Second), Keys: []string{ka}},
			{Req: get("/a", Peer1), Status: 200, Header: XRL(2, 0, 60*time.Second), Keys: []string{ka}},
			{Req: get("/a", Peer1), Status: 429, Problem: "global", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{ka}},
			// another endpoint has its own quota
			{Req: get("/b", Peer1), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{kb}},
			{Req: get("/a", Peer2), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{k2}},
			// 29.999s later the exact retry-after has not elapsed ...
			{Advance: 30*time.Second - time.Millisecond, Req: get("/a", Peer1), Status: 429, Problem: "global",
				Header: XRL(2, 0, 60*time.Second).With("Retry-After", "1"), Keys: []string{ka}},
			// ... 1ms later it has.
			{Advance: time.Millisecond, Req: get("/a", Peer1), Status: 200, Header: XRL(2, 0, 90*time.Second), Keys: []string{ka}},
		}
		Play(t, env, c, steps)
	}},
	{"GlobalTwoRoutesUnknownRoute", func(t *testing.T, h Harness, env *Env) {
		// global middleware, two routes, separate quotas; unknown route:
		// every adapter keys a global middleware by the route the request
		// will reach (fiber too, though its app.Use runs before routing),
		// and requests that reach no route share one "unmatched" quota
		// per client (the empty scope), whatever their path.
		l := env.Limiter(t, policy("global", core.PerMinute(2)))
		c := build(t, h, App{
			Global: mw(l, httplimit.WithClock(env.Clock)),
			Routes: []Route{{Method: "GET", Path: "/users/:id"}, {Method: "GET", Path: "/items"}},
		})
		ku := "global#" + h.Scope("GET", "/users/:id") + "|" + IP1
		ki := "global#" + h.Scope("GET", "/items") + "|" + IP1
		kn := "global#|" + IP1
		notAllowed := http.StatusMethodNotAllowed
		if h.Name == "gin" {
			notAllowed = http.StatusNotFound
		}
		Play(t, env, c, []Step{
			{Req: get("/users/1", Peer1), Status: 200, Body: "ok", Header: XRL(2, 1, 30*time.Second), Keys: []string{ku}},
			{Req: get("/users/2", Peer1), Status: 200, Body: "ok", Header: XRL(2, 0, 60*time.Second), Keys: []string{ku}},
			{Req: get("/users/3", Peer1), Status: 429, Problem: "global", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{ku}},
			// the other route has its own quota
			{Req: get("/items", Peer1), Status: 200, Body: "ok", Header: XRL(2, 1, 30*time.Second), Keys: []string{ki}},
			// unknown paths: neither route's quota, one shared "unmatched" one
			{Req: get("/other", Peer1), Status: 404, Header: XRL(2, 1, 30*time.Second), Keys: []string{kn}},
			{Req: get("/items/x", Peer1), Status: 404, Header: XRL(2, 0, 60*time.Second), Keys: []string{kn}},
			{Req: get("/another", Peer1), Status: 429, Problem: "global", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{kn}},
			// a route's path with a method it does not serve reaches no
			// route either (405; gin answers 404 unless
			// HandleMethodNotAllowed is set)
			{Req: method("POST", "/items", Peer2), Status: notAllowed, Header: XRL(2, 1, 30*time.Second), Keys: []string{"global#|" + IP2}},
			// and the routes' quotas are as they were
			{Req: get("/items", Peer1), Status: 200, Body: "ok", Header: XRL(2, 0, 60*time.Second), Keys: []string{ki}},
			{Req: get("/users/4", Peer1), Status: 429, Problem: "global", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{ku}},
		})
	}},
	{"PerRouteLimit", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("login", core.PerMinute(1)))
		c := build(t, h, App{Routes: []Route{
			{Method: "POST", Path: "/login", Mw: mw(l, httplimit.WithClock(env.Clock))},
			{Method: "GET", Path: "/other"},
		}})
		k := "login#" + h.Scope("POST", "/login") + "|" + IP1
		Play(t, env, c, []Step{
			{Req: method("POST", "/login", Peer1), Status: 200, Body: "ok", Header: XRL(1, 0, time.Minute), Keys: []string{k}},
			{Req: method("POST", "/login", Peer1), Status: 429, Problem: "login", Header: XRL(1, 0, time.Minute).With("Retry-After", "60"), Keys: []string{k}},
			{Req: get("/other", Peer1), Status: 200, Body: "ok"},
			{Req: get("/other", Peer1), Status: 200, Body: "ok"},
		})
	}},
	{"RoutePatternKeys", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("users", core.PerMinute(2)))
		m := mw(l, httplimit.WithClock(env.Clock), httplimit.WithResetDelta())
		shared := env.Limiter(t, policy("shared", core.PerMinute(1)))
		ms := mw(shared, httplimit.WithScope("uploads"), httplimit.WithResetDelta())
		c := build(t, h, App{Routes: []Route{
			{Method: "GET", Path: "/users/:id", Mw: m},
			{Method: "DELETE", Path: "/users/:id", Mw: m},
			{Method: "POST", Path: "/up/a", Mw: ms},
			{Method: "POST", Path: "/up/b", Mw: ms},
		}})
		kg := "users#" + h.Scope("GET", "/users/:id") + "|" + IP1
		kd := "users#" + h.Scope("DELETE", "/users/:id") + "|" + IP1
		ku := "shared#uploads|" + IP1
		delta := func(limit, rem, reset int64) H {
			return H{"X-Ratelimit-Limit": strconv.FormatInt(limit, 10), "X-Ratelimit-Remaining": strconv.FormatInt(rem, 10), "X-Ratelimit-Reset": strconv.FormatInt(reset, 10)}
		}
		Play(t, env, c, []Step{
			{Req: get("/users/1", Peer1), Status: 200, Header: delta(2, 1, 30), Keys: []string{kg}},
			{Req: get("/users/2", Peer1), Status: 200, Header: delta(2, 0, 60), Keys: []string{kg}},
			{Req: get("/users/3", Peer1), Status: 429, Problem: "users", Header: delta(2, 0, 60).With("Retry-After", "30"), Keys: []string{kg}},
			// another method of the same pattern is another endpoint
			{Req: method("DELETE", "/users/1", Peer1), Status: 200, Header: delta(2, 1, 30), Keys: []string{kd}},
			// WithScope shares one named quota between routes
			{Req: method("POST", "/up/a", Peer1), Status: 200, Header: delta(1, 0, 60), Keys: []string{ku}},
			{Req: method("POST", "/up/b", Peer1), Status: 429, Problem: "shared", Header: delta(1, 0, 60).With("Retry-After", "60"), Keys: []string{ku}},
		})
	}},
	{"HybridUserAndIP", func(t *testing.T, h Harness, env *Env) {
		user := env.Limiter(t, policy("user", core.PerMinute(2)))
		ip := env.Limiter(t, policy("ip", core.PerMinute(3)))
		userKey, err := keyfuncs.Header("X-User")
		require.NoError(t, err)
		c := build(t, h, App{Global: mw(user, httplimit.WithClock(env.Clock), httplimit.WithKey(userKey),
			httplimit.WithNoKeySkip(), httplimit.WithCheck(ip, nil)),
			Routes: []Route{{Method: "GET", Path: "/h"}}})
		sc := h.Scope("GET", "/h") + "|"
		ua, ub, i1, i2 := "user#"+sc+"alice", "user#"+sc+"bob", "ip#"+sc+IP1, "ip#"+sc+IP2
		Play(t, env, c, []Step{
			// the user check binds (1 left against the IP's 2)
			{Req: get("/h", Peer1, "X-User", "alice"), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{ua, i1}},
			{Req: get("/h", Peer1, "X-User", "alice"), Status: 200, Header: XRL(2, 0, 60*time.Second), Keys: []string{ua, i1}},
			// alice is over her user quota: the IP check is not reached
			{Req: get("/h", Peer1, "X-User", "alice"), Status: 429, Problem: "user", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{ua}},
			// bob shares alice's IP: the IP check binds
			{Req: get("/h", Peer1, "X-User", "bob"), Status: 200, Header: XRL(3, 0, 60*time.Second), Keys: []string{ub, i1}},
			{Req: get("/h", Peer1, "X-User", "bob"), Status: 429, Problem: "ip", Header: XRL(3, 0, 60*time.Second).With("Retry-After", "20"), Keys: []string{ub, i1}},
			// anonymous: the user check is skipped, the IP check applies
			{Req: get("/h", Peer2), Status: 200, Header: XRL(3, 2, 20*time.Second), Keys: []string{i2}},
		})
	}},
	{"Shadow", func(t *testing.T, h Harness, env *Env) {
		p := policy("shadow", core.PerMinute(1))
		p.Shadow = true
		l := env.Limiter(t, p)
		c := build(t, h, App{Routes: []Route{{Method: "GET", Path: "/s", Mw: mw(l, httplimit.WithClock(env.Clock))}}})
		k := "shadow#" + h.Scope("GET", "/s") + "|" + IP1
		Play(t, env, c, []Step{
			{Req: get("/s", Peer1), Status: 200, Header: XRL(1, 0, time.Minute), Keys: []string{k}},
			// would be denied: passes, no Retry-After
			{Req: get("/s", Peer1), Status: 200, Body: "ok", Header: XRL(1, 0, time.Minute), Keys: []string{k}},
			{Req: get("/s", Peer1), Status: 200, Body: "ok", Header: XRL(1, 0, time.Minute), Keys: []string{k}},
		})
	}},
	{"SoftLimit", func(t *testing.T, h Harness, env *Env) {
		p := policy("soft", core.PerMinute(2))
		p.SoftPercent = 50
		l := env.Limiter(t, p)
		c := build(t, h, App{Routes: []Route{{Method: "GET", Path: "/s", Mw: mw(l, httplimit.WithClock(env.Clock))}}})
		k := "soft#" + h.Scope("GET", "/s") + "|" + IP1
		Play(t, env, c, []Step{
			{Req: get("/s", Peer1), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{k}},
			{Req: get("/s", Peer1), Status: 200, Header: XRL(2, 0, 60*time.Second), Keys: []string{k}},
			// 50% over the nominal limit is tolerated
			{Req: get("/s", Peer1), Status: 200, Header: XRL(2, 0, 90*time.Second), Keys: []string{k}},
			{Req: get("/s", Peer1), Status: 429, Problem: "soft", Header: XRL(2, 0, 90*time.Second).With("Retry-After", "30"), Keys: []string{k}},
		})
	}},
	{"CustomDenial", func(t *testing.T, h Harness, env *Env) {
		a := env.Limiter(t, policy("a", core.PerMinute(1)))
		b := env.Limiter(t, policy("b", core.PerMinute(1)))
		d := env.Limiter(t, policy("d", core.PerMinute(1)))
		c := build(t, h, App{Routes: []Route{
			{Method: "GET", Path: "/status", Mw: mw(a, httplimit.WithClock(env.Clock), httplimit.WithDenyStatus(http.StatusForbidden),
				httplimit.WithDenyBody("text/plain; charset=utf-8", []byte("slow down")))},
			{Method: "GET", Path: "/handler", Mw: mw(b, httplimit.WithClock(env.Clock), h.CustomDeny())},
			{Method: "GET", Path: "/quiet", Mw: mw(d, httplimit.WithHeaders(httplimit.HeaderNone))},
		}})
		ka := "a#" + h.Scope("GET", "/status") + "|" + IP1
		kb := "b#" + h.Scope("GET", "/handler") + "|" + IP1
		kd := "d#" + h.Scope("GET", "/quiet") + "|" + IP1
		Play(t, env, c, []Step{
			{Req: get("/status", Peer1), Status: 200, Header: XRL(1, 0, time.Minute), Keys: []string{ka}},
			{Req: get("/status", Peer1), Status: 403, Body: "slow down", Header: XRL(1, 0, time.Minute).With("Retry-After", "60"), Keys: []string{ka}},
			{Req: get("/handler", Peer1), Status: 200, Header: XRL(1, 0, time.Minute), Keys: []string{kb}},
			{Req: get("/handler", Peer1), Status: 418, Body: "denied:limited:b:60",
				Header: XRL(1, 0, time.Minute).With("Retry-After", "60", "X-Denied", "limited"), Keys: []string{kb}},
			{Req: get("/quiet", Peer1), Status: 200, Keys: []string{kd}},
			{Req: get("/quiet", Peer1), Status: 429, Problem: "d", Keys: []string{kd}},
		})
	}},
	{"StoreFailureOpen", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("open", core.PerMinute(1)))
		var mu sync.Mutex
		var errs []error
		hook := func(_ context.Context, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
		c := build(t, h, App{Routes: []Route{{Method: "GET", Path: "/o", Mw: mw(l, httplimit.WithClock(env.Clock),
			httplimit.WithDegradedHeader("X-RateLimit-Degraded"), httplimit.WithErrorHook(hook))}}})
		k := "open#" + h.Scope("GET", "/o") + "|" + IP1
		env.Store.SetFail(errors.New("dial tcp 10.0.0.5:6379: connection refused"))
		Play(t, env, c, []Step{
			{Req: get("/o", Peer1), Status: 200, Body: "ok", Header: H{"X-Ratelimit-Degraded": "1"}, Keys: []string{k}},
			{Req: get("/o", Peer1), Status: 200, Body: "ok", Header: H{"X-Ratelimit-Degraded": "1"}, Keys: []string{k}},
		})
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, errs, 2)
		var se *core.StoreError
		require.ErrorAs(t, errs[0], &se)
		assert.Equal(t, "open", se.Policy)
		assert.Equal(t, core.FailOpen, se.Mode)
		// the store recovers: limiting resumes
		env.Store.SetFail(nil)
		Play(t, env, c, []Step{
			{Req: get("/o", Peer1), Status: 200, Header: XRL(1, 0, time.Minute), Keys: []string{k}},
			{Req: get("/o", Peer1), Status: 429, Problem: "open", Header: XRL(1, 0, time.Minute).With("Retry-After", "60"), Keys: []string{k}},
		})
	}},
	{"StoreFailureClosed", func(t *testing.T, h Harness, env *Env) {
		p := policy("closed", core.PerMinute(5))
		p.FailMode = core.FailClosed
		l := env.Limiter(t, p)
		var mu sync.Mutex
		var errs []error
		hook := func(_ context.Context, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
		c := build(t, h, App{Routes: []Route{
			{Method: "GET", Path: "/c", Mw: mw(l, httplimit.WithClock(env.Clock), httplimit.WithErrorHook(hook))},
			{Method: "GET", Path: "/h", Mw: mw(l, httplimit.WithClock(env.Clock), h.CustomDeny())},
		}})
		k := "closed#" + h.Scope("GET", "/c") + "|" + IP1
		env.Store.SetFail(errors.New("dial tcp 10.0.0.5:6379: connection refused"))
		Play(t, env, c, []Step{
			{Req: get("/c", Peer1), Status: 503, Body: UnavailableBody, Header: H{"Retry-After": "1"}, Keys: []string{k}},
			{Req: get("/h", Peer1), Status: 418, Body: "denied:unavailable:closed:1", Header: H{"Retry-After": "1", "X-Denied": "unavailable"},
				Keys: []string{"closed#" + h.Scope("GET", "/h") + "|" + IP1}},
		})
		resp := c(get("/c", Peer1))
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		assert.NotContains(t, resp.Body, "10.0.0.5")
		assert.NotContains(t, resp.Body, "refused")
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, errs)
		var se *core.StoreError
		require.ErrorAs(t, errs[0], &se)
		assert.Equal(t, core.FailClosed, se.Mode)
	}},
	{"SpoofedXFFIgnored", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("ip", core.PerMinute(2)))
		c := build(t, h, App{Routes: []Route{{Method: "GET", Path: "/x", Mw: mw(l, httplimit.WithClock(env.Clock))}}})
		sc := h.Scope("GET", "/x") + "|"
		k := "ip#" + sc + IP1
		Play(t, env, c, []Step{
			{Req: get("/x", Peer1, "X-Forwarded-For", "1.1.1.1", "X-Real-IP", "1.1.1.1"), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{k}},
			{Req: get("/x", Peer1, "X-Forwarded-For", "2.2.2.2, 3.3.3.3", "X-Real-IP", "2.2.2.2", "Forwarded", "for=2.2.2.2"), Status: 200, Header: XRL(2, 0, 60*time.Second), Keys: []string{k}},
			// rotating the headers does not mint a new key
			{Req: get("/x", Peer1, "X-Forwarded-For", "4.4.4.4", "True-Client-IP", "4.4.4.4", "CF-Connecting-IP", "4.4.4.4"), Status: 429, Problem: "ip",
				Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{k}},
			// one IPv6 /64 is one client, whatever its interface id
			{Req: get("/x", "[2001:db8:1:2::7]:443"), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{"ip#" + sc + "2001:db8:1:2::/64"}},
			{Req: get("/x", "[2001:db8:1:2:ffff::8]:443"), Status: 200, Header: XRL(2, 0, 60*time.Second), Keys: []string{"ip#" + sc + "2001:db8:1:2::/64"}},
			// an IPv4-mapped peer is the IPv4 client
			{Req: get("/x", "[::ffff:198.51.100.9]:80"), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{"ip#" + sc + IP2}},
		})
	}},
	{"NoKey", func(t *testing.T, h Harness, env *Env) {
		apiKey, err := keyfuncs.Header("X-API-Key")
		require.NoError(t, err)
		bad := errors.New("token signature invalid")
		badKey := func(keyfuncs.Request) (string, error) { return "", bad }
		var mu sync.Mutex
		var errs []error
		hook := func(_ context.Context, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
		lf := env.Limiter(t, policy("fb", core.PerMinute(5)))
		ls := env.Limiter(t, policy("skip", core.PerMinute(5)))
		ld := env.Limiter(t, policy("deny", core.PerMinute(5)))
		lb := env.Limiter(t, policy("bad", core.PerMinute(5)))
		lh := env.Limiter(t, policy("dh", core.PerMinute(5)))
		lu := env.Limiter(t, policy("def", core.PerMinute(5)))
		lo := env.Limiter(t, policy("opt", core.PerMinute(5)))
		c := build(t, h, App{Routes: []Route{
			{Method: "GET", Path: "/fb", Mw: mw(lf, httplimit.WithClock(env.Clock), httplimit.WithKey(apiKey))},
			{Method: "GET", Path: "/skip", Mw: mw(ls, httplimit.WithClock(env.Clock), httplimit.WithKey(apiKey), httplimit.WithNoKeySkip())},
			{Method: "GET", Path: "/deny", Mw: mw(ld, httplimit.WithClock(env.Clock), httplimit.WithKey(apiKey), httplimit.WithNoKeyDeny())},
			{Method: "GET", Path: "/bad", Mw: mw(lb, httplimit.WithClock(env.Clock), httplimit.WithKey(badKey), httplimit.WithErrorHook(hook))},
			{Method: "GET", Path: "/dh", Mw: mw(lh, httplimit.WithKey(apiKey), httplimit.WithNoKeyDeny(), h.CustomDeny())},
			// all defaults (peer-IP key, the fallback key), and the quota
			// denial's status and body options, which a no-key denial ignores
			{Method: "GET", Path: "/def", Mw: mw(lu, httplimit.WithClock(env.Clock))},
			{Method: "GET", Path: "/opt", Mw: mw(lo, httplimit.WithClock(env.Clock), httplimit.WithDenyStatus(503), httplimit.WithDenyBody("text/plain", []byte("slow down")),
				httplimit.WithHeaders(httplimit.HeaderDefault|httplimit.HeaderIETF))},
		}})
		s := func(p string) string { return h.Scope("GET", p) + "|" }
		Play(t, env, c, []Step{
			{Req: get("/fb", Peer1, "X-API-Key", "k1"), Status: 200, Header: XRL(5, 4, 12*time.Second), Keys: []string{"fb#" + s("/fb") + "k1"}},
			// no key: the peer IP, under a prefix that no API key can take
			{Req: get("/fb", Peer1), Status: 200, Header: XRL(5, 4, 12*time.Second), Keys: []string{"fb#" + s("/fb") + "~fb/" + IP1}},
			{Req: get("/fb", Peer1, "X-API-Key", IP1), Status: 200, Header: XRL(5, 4, 12*time.Second), Keys: []string{"fb#" + s("/fb") + IP1}},
			{Req: get("/skip", Peer1), Status: 200, Body: "ok"},
			{Req: get("/skip", Peer1, "X-API-Key", "k1"), Status: 200, Header: XRL(5, 4, 12*time.Second), Keys: []string{"skip#" + s("/skip") + "k1"}},
			// a no-key denial is not a quota denial: 403, no quota body, no
			// X-RateLimit-* or Retry-After, nothing counted
			{Req: get("/deny", Peer1), Status: 403, Body: NoKeyBody},
			{Req: get("/deny", Peer1, "X-API-Key", "k1"), Status: 200, Keys: []string{"deny#" + s("/deny") + "k1"},
				Header: H{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "4", "X-Ratelimit-Reset": strconv.FormatInt(T0.Add(12*time.Second).Unix(), 10)}},
			// invalid material is reported and falls back
			{Req: get("/bad", Peer1), Status: 200, Header: XRL(5, 4, 12*time.Second), Keys: []string{"bad#" + s("/bad") + "~fb/" + IP1}},
			{Req: get("/dh", Peer1), Status: 418, Body: "denied:no_key:dh:0", Header: H{"X-Denied": "no_key"}},
			// a peer that is not an IP (a Unix socket behind a local proxy):
			// the default fallback finds no key either
			{Req: get("/def", "@"), Status: 403, Body: NoKeyBody},
			{Req: get("/def", "/tmp/app.sock"), Status: 403, Body: NoKeyBody},
			{Req: get("/def", Peer1), Status: 200, Header: XRL(5, 4, 12*time.Second), Keys: []string{"def#" + s("/def") + IP1}},
			{Req: get("/opt", "/tmp/app.sock"), Status: 403, Body: NoKeyBody, Header: H{"Ratelimit-Policy": `"opt";q=5;w=60`}},
		})
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], bad)
	}},
	{"SkipHook", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("g", core.PerMinute(1)))
		skip := func(r keyfuncs.Request) bool { return r.Path() == "/healthz" }
		c := build(t, h, App{Global: mw(l, httplimit.WithClock(env.Clock), httplimit.WithSkip(skip), httplimit.WithScope("")),
			Routes: []Route{{Method: "GET", Path: "/healthz"}, {Method: "GET", Path: "/api"}}})
		k := "g#|" + IP1
		Play(t, env, c, []Step{
			{Req: get("/healthz", Peer1), Status: 200, Body: "ok"},
			{Req: get("/api", Peer1), Status: 200, Header: XRL(1, 0, time.Minute), Keys: []string{k}},
			{Req: get("/healthz", Peer1), Status: 200, Body: "ok"},
			{Req: get("/api", Peer1), Status: 429, Problem: "g", Header: XRL(1, 0, time.Minute).With("Retry-After", "60"), Keys: []string{k}},
			{Req: get("/healthz", Peer1), Status: 200, Body: "ok"},
		})
	}},
	{"IETFHeaders", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("api", core.PerMinute(2), core.PerHour(100)))
		c := build(t, h, App{Routes: []Route{{Method: "GET", Path: "/i", Mw: mw(l,
			httplimit.WithHeaders(httplimit.HeaderDefault|httplimit.HeaderIETF), httplimit.WithResetDelta())}}})
		k := "api#" + h.Scope("GET", "/i") + "|" + IP1
		pol := `"api-1m";q=2;w=60, "api-1h";q=100;w=3600`
		hd := func(rem, reset int64, rl string) H {
			return H{"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": strconv.FormatInt(rem, 10),
				"X-Ratelimit-Reset": strconv.FormatInt(reset, 10), "Ratelimit-Policy": pol, "Ratelimit": rl}
		}
		Play(t, env, c, []Step{
			{Req: get("/i", Peer1), Status: 200, Header: hd(1, 30, `"api-1m";r=1;t=30`), Keys: []string{k}},
			{Req: get("/i", Peer1), Status: 200, Header: hd(0, 60, `"api-1m";r=0;t=60`), Keys: []string{k}},
			{Req: get("/i", Peer1), Status: 429, Problem: "api", Header: hd(0, 60, `"api-1m";r=0;t=30`).With("Retry-After", "30"), Keys: []string{k}},
		})
	}},
	{"NeverRetry", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("big", core.PerMinute(2)))
		cost := func(keyfuncs.Request) int64 { return 5 }
		c := build(t, h, App{Routes: []Route{{Method: "POST", Path: "/bulk", Mw: mw(l, httplimit.WithClock(env.Clock), httplimit.WithCost(cost),
			httplimit.WithHeaders(httplimit.HeaderDefault|httplimit.HeaderIETF))}}})
		k := "big#" + h.Scope("POST", "/bulk") + "|" + IP1
		// a cost above the capacity can never be admitted: 429 without
		// Retry-After (and without the IETF t), never an overflowed value
		Play(t, env, c, []Step{
			{Req: method("POST", "/bulk", Peer1), Status: 429, Problem: "big",
				Header: XRL(2, 0, 0).With("Ratelimit-Policy", `"big";q=2;w=60`, "Ratelimit", `"big";r=0`), Keys: []string{k}},
		})
	}},
	{"AnyMethodRouteHasOneQuota", func(t *testing.T, h Harness, env *Env) {
		// issue 22: a route registered for every method (a net/http
		// pattern without one, r.Any, e.Any, app.All) has one quota per
		// client whatever the method, as a global and as a per-route
		// middleware
		methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "CONNECT"}
		for _, global := range []bool{true, false} {
			name := map[bool]string{true: "anyg", false: "anyr"}[global]
			c := oneRoute(t, h, env, global, policy(name, core.PerMinute(5)), Route{Method: AnyMethod, Path: "/api2/:id"})
			k := name + "#" + h.Scope("", "/api2/:id") + "|" + IP1
			var steps []Step
			for i, m := range methods {
				st := Step{Req: method(m, "/api2/7", Peer1), Status: 200, Header: XRL(5, int64(4-i), time.Duration(i+1)*12*time.Second), Keys: []string{k}}
				if i >= 5 {
					st.Status, st.Header = 429, XRL(5, 0, 60*time.Second).With("Retry-After", "12")
				}
				steps = append(steps, st)
			}
			Play(t, env, c, steps)
		}
	}},
	{"HeadSharesGetQuota", func(t *testing.T, h Harness, env *Env) {
		// issue 22: HEAD on a GET route spends the GET quota (fiber's
		// app.Get registers HEAD, net/http's GET pattern serves it; gin
		// and echo register it explicitly)
		for _, global := range []bool{true, false} {
			name := map[bool]string{true: "headg", false: "headr"}[global]
			c := oneRoute(t, h, env, global, policy(name, core.PerMinute(2)), Route{Method: GetHead, Path: "/page/:id"})
			k := name + "#" + h.Scope("GET", "/page/:id") + "|" + IP1
			denied := XRL(2, 0, 60*time.Second).With("Retry-After", "30")
			Play(t, env, c, []Step{
				{Req: method("HEAD", "/page/1", Peer1), Status: 200, Header: XRL(2, 1, 30*time.Second), Keys: []string{k}},
				{Req: get("/page/1", Peer1), Status: 200, Header: XRL(2, 0, 60*time.Second), Keys: []string{k}},
				{Req: method("HEAD", "/page/1", Peer1), Status: 429, Header: denied, Keys: []string{k}},
				{Req: get("/page/1", Peer1), Status: 429, Problem: name, Header: denied, Keys: []string{k}},
			})
		}
	}},
}
