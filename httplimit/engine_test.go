package httplimit

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit/internal/respond"
	"github.com/limitkit/limitkit/keyfuncs"
)

// keyStore records keys and admits everything.
type keyStore struct {
	mu   sync.Mutex
	keys []string
}

func (s *keyStore) Take(_ context.Context, key string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return core.Decision{Allowed: true, Limit: p.Limits[0], Remaining: 1, Policy: p.Name}, nil
}

func (s *keyStore) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) == 0 {
		return ""
	}
	return s.keys[len(s.keys)-1]
}

func limiter(t testing.TB, st core.Store, name string) *core.Limiter {
	t.Helper()
	l, err := core.NewLimiter(st, core.Policy{Name: name, Limits: []core.Limit{core.PerMinute(10)}})
	require.NoError(t, err)
	return l
}

func httpReq(method, pattern, peer string) Request {
	r, _ := http.NewRequest(method, "http://example.com/x", nil)
	r.Pattern = pattern
	r.RemoteAddr = peer
	return httpView{r}
}

// routerReq is a framework's view: its route never names the method,
// and it knows whether the route accepts every method.
type routerReq struct {
	Request
	any bool
}

func (r routerReq) AnyMethod() bool { return r.any }

func TestNewErrors(t *testing.T) {
	l := limiter(t, &keyStore{}, "p")
	for _, tc := range []struct {
		name string
		lim  *core.Limiter
		opts []Option
		want string
	}{
		{"nil limiter", nil, nil, "x: New: nil *core.Limiter"},
		{"nil option", l, []Option{nil}, "x: nil Option"},
		{"nil key", l, []Option{WithKey(nil)}, "x: WithKey(nil)"},
		{"nil ip key", l, []Option{WithIPKey(nil)}, "x: WithIPKey(nil)"},
		{"nil check", l, []Option{WithCheck(nil, nil)}, "x: WithCheck(nil"},
		{"nil scope func", l, []Option{WithScopeFunc(nil)}, "x: WithScopeFunc(nil)"},
		{"nil fallback", l, []Option{WithFallbackKey(nil)}, "x: WithFallbackKey(nil)"},
		{"bad headers", l, []Option{WithHeaders(64)}, "x: WithHeaders(64)"},
		{"bad degraded header", l, []Option{WithDegradedHeader("bad header")}, `x: WithDegradedHeader("bad header")`},
		{"bad status", l, []Option{WithDenyStatus(200)}, "x: WithDenyStatus(200)"},
		{"nil clock", l, []Option{WithClock(nil)}, "x: WithClock(nil)"},
		{"nil deny handler", l, []Option{AdapterOption("x", "WithDenyHandler", (func())(nil))}, "x: x.WithDenyHandler(nil)"},
		{"nil adapter value", l, []Option{AdapterOption("x", "WithThing", nil)}, "x: x.WithThing(nil)"},
		{"another adapter's option", l, []Option{AdapterOption("y", "WithDenyHandler", func() {})},
			"x: y.WithDenyHandler is an option of package y, given to a x middleware: package x has no equivalent"},
		{"too many checks", l, func() []Option {
			var o []Option
			for i := 0; i < maxChecks; i++ {
				o = append(o, WithCheck(l, nil))
			}
			return o
		}(), "x: 9 checks, at most 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newEngineNamed("x", tc.lim, tc.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestDefaults guards the documented defaults: peer-IP key, "METHOD route"
// scope, X-RateLimit-* with epoch reset plus Retry-After, no IETF fields,
// 429, fallback on no key.
func TestDefaults(t *testing.T) {
	st := &keyStore{}
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	e, err := newEngineNamed("x", limiter(t, st, "p"), WithClock(clk))
	require.NoError(t, err)
	deny, err := AdapterOptionValue[func()](e, "WithDenyHandler")
	require.NoError(t, err)
	assert.Nil(t, deny)
	assert.Nil(t, e.InFlight())
	assert.Equal(t, HeaderXRateLimit|HeaderRetryAfter, e.cfg.headers)
	assert.False(t, e.cfg.resetDelta)
	assert.Equal(t, noKeyFallback, e.cfg.noKey)
	assert.Equal(t, http.StatusTooManyRequests, e.cfg.status)
	assert.Equal(t, core.Clock(clk), e.clock())

	res := decide(e, context.Background(), httpReq("GET", "GET /users/{id}", "[2001:db8::1]:9"))
	assert.Equal(t, "GET /users/{id}|2001:db8::/64", st.last())
	res.Decision.ResetAfter = 1500 * time.Millisecond
	var f Fields
	e.Fields(&res, &f)
	v, _ := f.f.Get(respond.HeaderReset)
	assert.Equal(t, "1700000002", v)
	_, ok := f.f.Get(respond.HeaderPolicy)
	assert.False(t, ok)
	rej := e.Reject(&Result{Action: Deny, Reason: ReasonLimited, Decision: core.Decision{Policy: "p", RetryAfter: time.Second}})
	assert.Equal(t, 429, rej.Status)
	assert.Equal(t, int64(1), rej.RetryAfter)
	assert.Equal(t, string(respond.QuotaExceededBody(429, "p")), string(rej.Body))
}

func TestScope(t *testing.T) {
	st := &keyStore{}
	e, err := newEngineNamed("x", limiter(t, st, "p"))
	require.NoError(t, err)
	for _, tc := range []struct {
		method, route, want string
	}{
		// net/http: a pattern names its method, or its handler serves
		// every method under one scope (issue 22)
		{"GET", "GET /users/{id}", "GET /users/{id}|203.0.113.7"},
		{"HEAD", "GET /users/{id}", "GET /users/{id}|203.0.113.7"},
		{"DELETE", "/users/{id}", "/users/{id}|203.0.113.7"},
		{"GET", "/users/{id}", "/users/{id}|203.0.113.7"},
		{"FROBNICATE", "/x", "/x|203.0.113.7"},
		{"GET", "example.com/x", "example.com/x|203.0.113.7"},
		{"GET", "", "|203.0.113.7"},
	} {
		decide(e, context.Background(), httpReq(tc.method, tc.route, "203.0.113.7:1"))
		assert.Equal(t, tc.want, st.last(), "%s %s", tc.method, tc.route)
	}
	// a framework's route pattern, which never names the method
	for _, tc := range []struct {
		method, route string
		any           bool
		want          string
	}{
		{"GET", "/users/:id", false, "GET /users/:id|203.0.113.7"},
		{"HEAD", "/users/:id", false, "GET /users/:id|203.0.113.7"},
		{"DELETE", "/users/:id", false, "DELETE /users/:id|203.0.113.7"},
		{"FROBNICATE", "/x", false, "OTHER /x|203.0.113.7"},
		{"get", "/x", false, "OTHER /x|203.0.113.7"},
		{"POST", "/api2", true, "/api2|203.0.113.7"},
		{"FROBNICATE", "/api2", true, "/api2|203.0.113.7"},
		{"GET", "", true, "|203.0.113.7"},
	} {
		decide(e, context.Background(), routerReq{httpReq(tc.method, tc.route, "203.0.113.7:1"), tc.any})
		assert.Equal(t, tc.want, st.last(), "%s %s", tc.method, tc.route)
	}
	fixed, err := newEngineNamed("x", limiter(t, st, "p"), WithScope("shared"))
	require.NoError(t, err)
	decide(fixed, context.Background(), httpReq("GET", "/a", "203.0.113.7:1"))
	assert.Equal(t, "shared|203.0.113.7", st.last())
	fn, err := newEngineNamed("x", limiter(t, st, "p"), WithScopeFunc(func(r keyfuncs.Request) string { return "fn:" + r.Method() }))
	require.NoError(t, err)
	decide(fn, context.Background(), httpReq("PUT", "/a", "203.0.113.7:1"))
	assert.Equal(t, "fn:PUT|203.0.113.7", st.last())
}

func TestLongKeyIsBounded(t *testing.T) {
	st := &keyStore{}
	long := strings.Repeat("k", 10_000)
	e, err := newEngineNamed("x", limiter(t, st, "p"), WithKey(func(keyfuncs.Request) (string, error) { return long, nil }))
	require.NoError(t, err)
	decide(e, context.Background(), httpReq("GET", "GET /a", "203.0.113.7:1"))
	assert.Equal(t, "GET /a|"+keyfuncs.Bound(long), st.last())
}

func TestCostAtLeastOne(t *testing.T) {
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	ms := memstore.MustNew()
	defer ms.Close()
	l, err := core.NewLimiter(ms, core.Policy{Name: "c", Limits: []core.Limit{core.PerMinute(10)}}, core.WithClock(clk))
	require.NoError(t, err)
	for _, tc := range []struct {
		cost, remaining int64
	}{{-5, 9}, {0, 8}, {1, 7}, {3, 4}, {2, 2}} { // 2: the boundary of "at least one"
		e, err := newEngineNamed("x", l, WithCost(func(keyfuncs.Request) int64 { return tc.cost }))
		require.NoError(t, err)
		res := decide(e, context.Background(), httpReq("GET", "/a", "203.0.113.7:1"))
		assert.Equal(t, tc.remaining, res.Decision.Remaining, "cost %d", tc.cost)
	}
}

func TestNoKeyFallbackFails(t *testing.T) {
	st := &keyStore{}
	var errs []error
	e, err := newEngineNamed("x", limiter(t, st, "p"),
		WithFallbackKey(func(keyfuncs.Request) (string, error) { return "", errors.New("broken") }),
		WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }),
	)
	require.NoError(t, err)
	// the default key (peer IP) finds nothing on a unix-socket peer, the
	// fallback fails: denied, never let through unlimited
	res := decide(e, context.Background(), httpReq("GET", "/a", "@"))
	assert.Equal(t, Deny, res.Action)
	assert.Equal(t, ReasonNoKey, res.Reason)
	assert.Equal(t, core.Never, res.Decision.RetryAfter)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), `x: fallback key for policy "p": broken`)
	var f Fields
	e.Fields(&res, &f)
	assert.Equal(t, 0, f.Len(), "no decision, no Retry-After: nothing to say")
}

func TestIntern(t *testing.T) {
	a := interned.intern([]byte("GET /a|203.0.113.7"))
	b := interned.intern([]byte("GET /a|203.0.113.7"))
	assert.Equal(t, "GET /a|203.0.113.7", a)
	assert.Same(t, unsafeData(a), unsafeData(b), "a repeated key is served from the table")
	long := strings.Repeat("x", internMax+1)
	assert.Equal(t, long, interned.intern([]byte(long)))
	assert.Equal(t, "", interned.intern(nil))
	buf := []byte("mutable")
	s := interned.intern(buf)
	buf[0] = 'X'
	assert.Equal(t, "mutable", s, "interned strings never alias the caller's buffer")
}

func TestInternConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := []byte{byte('a' + g), byte(i), byte(i >> 8)}
				if got := interned.intern(k); got != string(k) {
					t.Errorf("interned.intern(%q) = %q", k, got)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func unsafeData(s string) *byte {
	if s == "" {
		return nil
	}
	return unsafe.StringData(s)
}

func TestDecideAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	ms := memstore.MustNew()
	defer ms.Close()
	l := core.MustNewLimiter(ms, core.Policy{Name: "a", Limits: []core.Limit{core.Per(1<<30, 24*time.Hour)}})
	e, err := newEngineNamed("x", l)
	require.NoError(t, err)
	req := httpReq("GET", "GET /a", "203.0.113.7:1")
	ctx := context.Background()
	decide(e, ctx, req)
	assert.Equal(t, 0.0, testing.AllocsPerRun(200, func() {
		res := decide(e, ctx, req)
		var f Fields
		e.Fields(&res, &f)
	}), "a returning client: no allocation before the headers are written")
}

// FuzzDecide feeds client-controlled material (peer address, method,
// header) to the engine: it never panics and keys stay bounded.
func FuzzDecide(f *testing.F) {
	f.Add("203.0.113.7:1", "GET", "k")
	f.Add("[2001:db8::1%eth0]:443", "PATCH", "")
	f.Add("garbage", "\x00", strings.Repeat("~", 300))
	st := &keyStore{}
	hk, err := keyfuncs.Header("X-Key")
	require.NoError(f, err)
	e, err := newEngineNamed("x", limiter(f, st, "p"), WithKey(hk))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, peer, method, key string) {
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/x", nil)
		r.Method, r.RemoteAddr, r.Pattern = method, peer, "/x"
		r.Header["X-Key"] = []string{key}
		res := decide(e, context.Background(), httpView{r})
		var fl Fields
		e.Fields(&res, &fl)
		if res.Action == Pass {
			k := st.last()
			assert.LessOrEqual(t, len(k), len("OTHER /x|")+len(fallbackPrefix)+64+64)
		}
	})
}

// TestUnixSocketPeerIsNotAQuotaDenial guards the review finding that a
// peer address that is not an IP (a Unix socket behind a local proxy)
// was answered 429 with the quota-exceeded body: with the default key
// and no-key mode it is a 403 no-key denial that claims no quota, writes
// no X-RateLimit-* or Retry-After field, ignores the quota denial's
// status and body options, and is reported to the error hook.
func TestUnixSocketPeerIsNotAQuotaDenial(t *testing.T) {
	for _, peer := range []string{"@", "/tmp/app.sock", "", "unix:/run/app.sock", "localhost:80"} {
		for _, opts := range [][]Option{nil, {WithDenyStatus(503), WithDenyBody("text/plain", []byte("slow down"))}, {WithHeaders(HeaderDefault | HeaderIETF)}} {
			st := &keyStore{}
			var errs []error
			opts := append(opts, WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }))
			e, err := newEngineNamed("x", limiter(t, st, "p"), opts...)
			require.NoError(t, err)
			res := decide(e, context.Background(), httpReq("GET", "/a", peer))
			require.Equal(t, Deny, res.Action, "peer %q", peer)
			assert.Equal(t, ReasonNoKey, res.Reason)
			assert.Empty(t, st.keys, "nothing is counted")
			var f Fields
			e.Fields(&res, &f)
			for _, h := range []string{respond.HeaderLimit, respond.HeaderRemaining, respond.HeaderReset, respond.HeaderRetryAfter, respond.HeaderRateLimit} {
				_, ok := f.f.Get(h)
				assert.False(t, ok, "peer %q: %s claims a quota", peer, h)
			}
			rej := e.Reject(&res)
			assert.Equal(t, http.StatusForbidden, rej.Status)
			assert.Equal(t, respond.ContentTypeProblem, rej.ContentType)
			assert.Equal(t, string(respond.NoKeyBody()), string(rej.Body))
			assert.NotContains(t, string(rej.Body), "quota")
			assert.Equal(t, int64(0), rej.RetryAfter)
			require.Len(t, errs, 1)
			assert.ErrorIs(t, errs[0], keyfuncs.ErrNoKey)
			assert.Contains(t, errs[0].Error(), `x: policy "p": no key, and the fallback key found none either`)
		}
	}
	// the quota denial keeps its configured status and body
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"), WithDenyStatus(503), WithDenyBody("text/plain", []byte("slow down")))
	require.NoError(t, err)
	rej := e.Reject(&Result{Action: Deny, Reason: ReasonLimited, Decision: core.Decision{Policy: "p", RetryAfter: time.Second}})
	assert.Equal(t, 503, rej.Status)
	assert.Equal(t, "slow down", string(rej.Body))
}

// TestNoKeyDenyStatus: WithNoKeyDeny answers the same 403 no-key denial when
// the request carries no key, without consulting any fallback.
func TestNoKeyDenyStatus(t *testing.T) {
	st := &keyStore{}
	apiKey, err := keyfuncs.Header("X-API-Key")
	require.NoError(t, err)
	e, err := newEngineNamed("x", limiter(t, st, "p"), WithKey(apiKey), WithNoKeyDeny())
	require.NoError(t, err)
	res := decide(e, context.Background(), httpReq("GET", "/a", "203.0.113.7:1"))
	require.Equal(t, ReasonNoKey, res.Reason)
	rej := e.Reject(&res)
	assert.Equal(t, http.StatusForbidden, rej.Status)
	assert.Equal(t, string(respond.NoKeyBody()), string(rej.Body))
	assert.Empty(t, st.keys)
}

// TestNoKeyModes: a request without a key is keyed by the fallback (the
// peer IP under "~fb/") by default and after WithFallbackKey, passes
// uncounted after WithNoKeySkip, and is denied after WithNoKeyDeny; the
// last of the three given wins.
func TestNoKeyModes(t *testing.T) {
	apiKey, err := keyfuncs.Header("X-API-Key")
	require.NoError(t, err)
	peer := keyfuncs.PeerIP().Key
	for _, tc := range []struct {
		name   string
		opts   []Option
		action Action
		keys   []string
	}{
		{"default", nil, Pass, []string{"/a|~fb/203.0.113.7"}},
		{"skip", []Option{WithNoKeySkip()}, Pass, nil},
		{"deny", []Option{WithNoKeyDeny()}, Deny, nil},
		{"skip then fallback", []Option{WithNoKeySkip(), WithFallbackKey(peer)}, Pass, []string{"/a|~fb/203.0.113.7"}},
		{"deny then skip", []Option{WithNoKeyDeny(), WithNoKeySkip()}, Pass, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &keyStore{}
			e, err := newEngineNamed("x", limiter(t, st, "p"), append([]Option{WithKey(apiKey)}, tc.opts...)...)
			require.NoError(t, err)
			res := decide(e, context.Background(), httpReq("GET", "/a", "203.0.113.7:1"))
			assert.Equal(t, tc.action, res.Action)
			assert.Equal(t, tc.keys, st.keys)
		})
	}
}

// localFallbackStore fails and decides by itself, as the fleet tier does
// under FailLocal: a denial from its local store carries the limit.
type localFallbackStore struct{ allowed bool }

func (s localFallbackStore) Take(_ context.Context, _ string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	d := core.Decision{Policy: p.Name, Allowed: s.allowed, Degraded: true, Limit: core.PerMinute(2), Remaining: 0}
	if !s.allowed {
		d.RetryAfter = 3 * time.Second
	}
	return d, errors.New("remote down")
}
func (localFallbackStore) FallsBackLocally() bool { return true }

// TestFailLocalDenialIsALimit: a denial by the local fallback store is a
// quota denial (429 with Retry-After), not the 503 of FailClosed.
func TestFailLocalDenialIsALimit(t *testing.T) {
	for _, allowed := range []bool{true, false} {
		l, err := core.NewLimiter(localFallbackStore{allowed: allowed}, core.Policy{Name: "p", FailMode: core.FailLocal, Limits: []core.Limit{core.PerMinute(10)}})
		require.NoError(t, err)
		e, err := newEngineNamed("x", l, WithErrorHook(func(context.Context, error) {}))
		require.NoError(t, err)
		res := decide(e, context.Background(), httpReq("GET", "/a", "203.0.113.7:1"))
		if allowed {
			assert.Equal(t, Pass, res.Action)
			continue
		}
		require.Equal(t, Deny, res.Action)
		assert.Equal(t, ReasonLimited, res.Reason)
		rej := e.Reject(&res)
		assert.Equal(t, http.StatusTooManyRequests, rej.Status)
		assert.Equal(t, int64(3), rej.RetryAfter)
	}
	// FailClosed stays 503
	l, err := core.NewLimiter(&failingStore{}, core.Policy{Name: "p", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(10)}})
	require.NoError(t, err)
	e, err := newEngineNamed("x", l, WithErrorHook(func(context.Context, error) {}))
	require.NoError(t, err)
	res := decide(e, context.Background(), httpReq("GET", "/a", "203.0.113.7:1"))
	assert.Equal(t, ReasonUnavailable, res.Reason)
}

type failingStore struct{}

func (*failingStore) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, errors.New("down")
}
