package serve_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/fiberlimit"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

const file = `
rules:
  - name: api
    route: /v1/*
    identity: authenticated
    key: user
    limits: ["2 per 1m"]
    tier: header:X-Plan
    tiers: {pro: ["4 per 1m"]}
    overrides: {"user:vip": ["6 per 1m"]}
  - name: login
    methods: [POST]
    route: /login
    key: form:username
    limits: ["3 per 15m"]
    count: {status: [401], reset_on: success}
    also:
      - {name: login-ip, key: ip, limits: ["5 per 15m"]}
`

func identity(t *testing.T) serve.Identity {
	user, err := keyfuncs.Header("X-User")
	require.NoError(t, err)
	return serve.Identity{User: user}
}

func routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/items", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("password") != "demo" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("welcome")) // writing nothing would be a counted failure
	})
	return mux
}

func send(h http.Handler, method, path, body string, hdr ...string) int {
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, path, nil)
	}
	r.RemoteAddr = "203.0.113.7:4000"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func quota(h http.Handler, hdr ...string) int {
	for n := range 100 {
		if send(h, "GET", "/v1/items", "", hdr...) == http.StatusTooManyRequests {
			return n
		}
	}
	return 100
}

func loginForm(user, password string) string {
	return url.Values{"username": {user}, "password": {password}}.Encode()
}

// TestNetHTTP serves a rules file in a net/http app: tiers, overrides,
// counting by outcome with an also: check, and a reload.
func TestNetHTTP(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(path, []byte(file), 0o600))
	set, err := rules.LoadFile(path)
	require.NoError(t, err)
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	srv, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t), LimiterOptions: []core.Option{core.WithClock(clock)}}, set, routes())
	require.NoError(t, err)

	assert.Equal(t, 2, quota(h, "X-User", "a"))
	assert.Equal(t, 4, quota(h, "X-User", "b", "X-Plan", "pro"))
	assert.Equal(t, 6, quota(h, "X-User", "vip", "X-Plan", "pro"))
	assert.Equal(t, 100, quota(h), "anonymous: no rule")

	var codes []int
	for range 4 {
		codes = append(codes, send(h, "POST", "/login", loginForm("alice", "x")))
	}
	assert.Equal(t, []int{401, 401, 401, 429}, codes)
	assert.Equal(t, 200, send(h, "POST", "/login", loginForm("bob", "demo")))
	assert.Equal(t, 401, send(h, "POST", "/login", loginForm("carol", "x")))
	assert.Equal(t, 401, send(h, "POST", "/login", loginForm("carol", "x")))
	assert.Equal(t, 429, send(h, "POST", "/login", loginForm("dave", "x")), "the IP's 5 failures")

	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(file, `pro: ["4 per 1m"]`, `pro: ["7 per 1m"]`, 1)), 0o600))
	ch, err := srv.Live().ReloadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "api/pro", ch.LimitsChanged[0].Name)
	assert.Equal(t, 7, quota(h, "X-User", "c", "X-Plan", "pro"))
}

// TestGin serves the same file through ginlimit in a few lines.
func TestGin(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	set, err := rules.Parse([]byte(file))
	require.NoError(t, err)
	srv, err := serve.New(serve.Config{Store: store, Identity: identity(t)}, set, ginlimit.NewMiddleware)
	require.NoError(t, err)
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		snap := srv.Live().Acquire()
		defer snap.Release()
		if mw, ok := srv.Middleware(snap, keyfuncs.FromHTTP(c.Request), c.FullPath()); ok {
			mw(c)
		}
	})
	r.GET("/v1/items", func(c *gin.Context) { c.String(200, "ok") })
	r.POST("/login", func(c *gin.Context) {
		if c.PostForm("password") != "demo" {
			c.Status(http.StatusUnauthorized)
		}
	})
	assert.Equal(t, 4, quota(r, "X-User", "b", "X-Plan", "pro"))
	assert.Equal(t, 2, quota(r, "X-User", "b", "X-Plan", "gold"))
	for range 3 {
		require.Equal(t, 401, send(r, "POST", "/login", loginForm("alice", "x")))
	}
	assert.Equal(t, 429, send(r, "POST", "/login", loginForm("alice", "demo")))
}

func TestRefusesWhatItCannotServe(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	set, err := rules.Parse([]byte(file))
	require.NoError(t, err)
	_, _, err = serve.NewNetHTTP(serve.Config{Store: store}, set, routes())
	assert.ErrorContains(t, err, `rule "api": key user: the Identity has no User key function`)
	set, err = rules.Parse([]byte(strings.Replace(file, "header:X-Plan", "claim:plan", 1)))
	require.NoError(t, err)
	_, _, err = serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t)}, set, routes())
	assert.ErrorContains(t, err, "the Identity has no Claim function")
	set, err = rules.Parse([]byte(strings.Replace(file, `"user:vip"`, `"key:k_big"`, 1)))
	require.NoError(t, err)
	_, _, err = serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t)}, set, routes())
	assert.ErrorContains(t, err, `override "key:k_big" cannot match a rule keyed by user`)
}

// TestEchoAndFiber serves the same file through echolimit and fiberlimit.
func TestEchoAndFiber(t *testing.T) {
	set, err := rules.Parse([]byte(file))
	require.NoError(t, err)
	loginHandler := func(password string) int {
		if password != "demo" {
			return http.StatusUnauthorized
		}
		return http.StatusOK
	}

	t.Run("echo", func(t *testing.T) {
		store := memstore.MustNew()
		defer store.Close()
		srv, err := serve.New(serve.Config{Store: store, Identity: identity(t)}, set, echolimit.NewMiddleware)
		require.NoError(t, err)
		e := echo.New()
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				snap := srv.Live().Acquire()
				defer snap.Release()
				if mw, ok := srv.Middleware(snap, keyfuncs.FromHTTP(c.Request()), c.Path()); ok {
					return mw(next)(c)
				}
				return next(c)
			}
		})
		e.GET("/v1/items", func(c echo.Context) error { return c.String(200, "ok") })
		e.POST("/login", func(c echo.Context) error {
			if code := loginHandler(c.FormValue("password")); code != 200 {
				return echo.NewHTTPError(code)
			}
			return c.NoContent(200)
		})
		assert.Equal(t, 4, quota(e, "X-User", "b", "X-Plan", "pro"))
		for range 3 {
			require.Equal(t, 401, send(e, "POST", "/login", loginForm("alice", "x")))
		}
		assert.Equal(t, 429, send(e, "POST", "/login", loginForm("alice", "demo")))
	})

	t.Run("fiber", func(t *testing.T) {
		store := memstore.MustNew()
		defer store.Close()
		srv, err := serve.New(serve.Config{Store: store, Identity: identity(t)}, set, fiberlimit.NewMiddleware)
		require.NoError(t, err)
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		// a handler of each route, so that c.Route() is the matched route
		dispatch := func(c *fiber.Ctx) error {
			snap := srv.Live().Acquire()
			defer snap.Release()
			if mw, ok := srv.Middleware(snap, fiberView{c}, c.Route().Path); ok {
				return mw(c)
			}
			return c.Next()
		}
		app.Get("/v1/items", dispatch, func(c *fiber.Ctx) error { return c.SendString("ok") })
		app.Post("/login", dispatch, func(c *fiber.Ctx) error { return c.SendStatus(loginHandler(c.FormValue("password"))) })
		h := adaptor.FiberApp(app)
		assert.Equal(t, 4, quota(h, "X-User", "b", "X-Plan", "pro"))
		for range 3 {
			require.Equal(t, 401, send(h, "POST", "/login", loginForm("alice", "x")))
		}
		assert.Equal(t, 429, send(h, "POST", "/login", loginForm("alice", "demo")))
	})
}

// fiberView is a keyfuncs.Request of a fiber context, for matching rules.
type fiberView struct{ c *fiber.Ctx }

func (v fiberView) Method() string                    { return v.c.Method() }
func (v fiberView) Route() string                     { return v.c.Route().Path }
func (v fiberView) Path() string                      { return v.c.Path() }
func (v fiberView) Header(name string) string         { return v.c.Get(name) }
func (v fiberView) HeaderValues(name string) []string { return []string{v.c.Get(name)} }
func (v fiberView) Query(name string) string          { return v.c.Query(name) }
func (v fiberView) RemoteAddr() string                { return v.c.Context().RemoteAddr().String() }
func (v fiberView) Value(key any) any                 { return v.c.UserContext().Value(key) }

// TestOnBuildCurrentGeneration: OnBuild sees every rule with all its
// limiters at New and again at each Swap, unchanged rules included;
// Current and Generation follow the sets served, and a refused set
// changes neither.
func TestOnBuildCurrentGeneration(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	set, err := rules.Parse([]byte(file))
	require.NoError(t, err)
	built := map[string][]string{}
	cfg := serve.Config{Store: store, Identity: identity(t), OnBuild: func(r *rules.Rule, ls rules.Limiters) {
		got := fmt.Sprintf("%s tiers %d overrides %d also %d", ls.Default.Policy().Name, len(ls.Tiers), len(ls.Overrides), len(ls.Also))
		built[r.Name] = append(built[r.Name], got)
	}}
	srv, err := serve.New(cfg, set, ginlimit.NewMiddleware)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"api": {"api tiers 1 overrides 1 also 0"}, "login": {"login tiers 0 overrides 0 also 1"}}, built)
	assert.Same(t, set, srv.Live().Current())
	assert.Equal(t, uint64(1), srv.Live().Generation())

	next, err := rules.Parse([]byte(strings.Replace(file, `"3 per 15m"`, `"4 per 15m"`, 1)))
	require.NoError(t, err)
	_, err = srv.Live().Swap(next)
	require.NoError(t, err)
	assert.Len(t, built["api"], 2, "an unchanged rule's middleware is built again")
	assert.Len(t, built["login"], 2)
	assert.Same(t, next, srv.Live().Current())
	assert.Equal(t, uint64(2), srv.Live().Generation())

	bad, err := rules.Parse([]byte(strings.Replace(file, `"user:vip"`, `"key:k_big"`, 1)))
	require.NoError(t, err)
	_, err = srv.Live().Swap(bad)
	require.Error(t, err)
	assert.Len(t, built["api"], 2, "a rule that cannot be served is not reported built")
	assert.Same(t, next, srv.Live().Current())
	assert.Equal(t, uint64(2), srv.Live().Generation())
}

// TestRoutePath: a route pattern's path is what rules match: the method
// and a host are dropped (the host case's path differs from the route,
// so falling back to the path shows), and only an empty or host-only
// route falls back to the request's path.
func TestRoutePath(t *testing.T) {
	for _, tt := range []struct{ route, path, want string }{
		{"GET /api1", "/api1", "/api1"},
		{"GET example.com/items/{id}", "/items/7", "/items/{id}"},
		{"example.com/items/{id}", "/items/7", "/items/{id}"},
		{"/users/:id", "/users/7", "/users/:id"},
		{"", "/raw", "/raw"},
		{"GET /", "/anything", "/"},
		{"example.com", "/x", "/x"},
	} {
		assert.Equal(t, tt.want, serve.RoutePath(tt.route, tt.path), tt.route)
	}
}

// TestResetOnSuccessClearsFailures: under `reset_on: success` a
// successful login clears the failures its user had: after two failures
// and a success, the user has the full three failures again before the
// fourth attempt is refused (without the reset the second would be).
func TestResetOnSuccessClearsFailures(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	set, err := rules.Parse([]byte(file))
	require.NoError(t, err)
	_, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t)}, set, routes())
	require.NoError(t, err)
	var codes []int
	for _, pw := range []string{"x", "x", "demo", "x", "x", "x", "x"} {
		codes = append(codes, send(h, "POST", "/login", loginForm("erin", pw)))
	}
	assert.Equal(t, []int{401, 401, 200, 401, 401, 401, 429}, codes)
}
