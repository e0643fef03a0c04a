package serve_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/fiberlimit"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

const concFile = `
rules:
  - name: exports
    route: /v1/export
    identity: authenticated
    concurrency: 2
    lease: 10s
`

// exportWork is the handler's work: it blocks until gate is closed, or
// panics for ?panic=1.
type exportWork struct {
	gate    chan struct{}
	entered chan struct{}
}

func (x *exportWork) run(r *http.Request) {
	if r.URL.Query().Get("panic") == "1" {
		panic("export failed")
	}
	if r.URL.Query().Get("block") == "1" {
		x.entered <- struct{}{}
		<-x.gate
	}
}

// TestConcurrencyRuleEveryAdapter: a rule with only concurrency: 2 holds
// a slot per request until its handler returns, on net/http, gin, echo
// and fiber: two blocked requests leave the third a 429 with
// Retry-After; once they return the slots are back; a panicking handler
// gives its slot back.
func TestConcurrencyRuleEveryAdapter(t *testing.T) {
	set, err := rules.Parse([]byte(concFile))
	require.NoError(t, err)
	gin.SetMode(gin.ReleaseMode)
	build := map[string]func(t *testing.T, x *exportWork) http.Handler{
		"nethttp": func(t *testing.T, x *exportWork) http.Handler {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/export", func(w http.ResponseWriter, r *http.Request) { x.run(r) })
			_, h, err := serve.NewNetHTTP(serve.Config{Store: memstore.MustNew(), Identity: identity(t)}, set, mux)
			require.NoError(t, err)
			return h
		},
		"gin": func(t *testing.T, x *exportWork) http.Handler {
			srv, err := serve.New(serve.Config{Store: memstore.MustNew(), Identity: identity(t)}, set, ginlimit.NewMiddleware)
			require.NoError(t, err)
			r := gin.New()
			r.Use(func(c *gin.Context) {
				snap := srv.Live().Acquire()
				defer snap.Release()
				if mw, ok := srv.Middleware(snap, keyfuncs.FromHTTP(c.Request), c.FullPath()); ok {
					mw(c)
				}
			})
			r.GET("/v1/export", func(c *gin.Context) { x.run(c.Request) })
			return r
		},
		"echo": func(t *testing.T, x *exportWork) http.Handler {
			srv, err := serve.New(serve.Config{Store: memstore.MustNew(), Identity: identity(t)}, set, echolimit.NewMiddleware)
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
			e.GET("/v1/export", func(c echo.Context) error { x.run(c.Request()); return nil })
			return e
		},
		"fiber": func(t *testing.T, x *exportWork) http.Handler {
			srv, err := serve.New(serve.Config{Store: memstore.MustNew(), Identity: identity(t)}, set, fiberlimit.NewMiddleware)
			require.NoError(t, err)
			app := fiber.New(fiber.Config{DisableStartupMessage: true})
			dispatch := func(c *fiber.Ctx) error {
				snap := srv.Live().Acquire()
				defer snap.Release()
				if mw, ok := srv.Middleware(snap, fiberView{c}, c.Route().Path); ok {
					return mw(c)
				}
				return c.Next()
			}
			app.Get("/v1/export", dispatch, func(c *fiber.Ctx) error {
				r := httptest.NewRequest("GET", c.OriginalURL(), nil)
				x.run(r)
				return nil
			})
			return adaptor.FiberApp(app)
		},
	}
	for name, mk := range build {
		t.Run(name, func(t *testing.T) {
			x := &exportWork{gate: make(chan struct{}), entered: make(chan struct{}, 2)}
			h := mk(t, x)
			call := func(q string) *httptest.ResponseRecorder {
				r := httptest.NewRequest("GET", "/v1/export"+q, nil)
				r.RemoteAddr = "203.0.113.7:4000"
				r.Header.Set("X-User", "alice")
				w := httptest.NewRecorder()
				func() {
					defer func() { _ = recover() }()
					h.ServeHTTP(w, r)
				}()
				return w
			}
			var wg sync.WaitGroup
			for i := 0; i < 2; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					assert.Equal(t, http.StatusOK, call("?block=1").Code)
				}()
			}
			<-x.entered
			<-x.entered
			w := call("")
			require.Equal(t, http.StatusTooManyRequests, w.Code)
			assert.Equal(t, "1", w.Header().Get("Retry-After"))
			assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"))
			close(x.gate)
			wg.Wait()
			for i := 0; i < 4; i++ {
				call("?panic=1")
			}
			w = call("")
			require.Equal(t, http.StatusOK, w.Code, "slots were not given back")
			assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"), "a concurrency-only rule's headers are the concurrency limit's")
			assert.Equal(t, "1", w.Header().Get("X-RateLimit-Remaining"))
		})
	}
	_ = time.Second
}

// TestConcurrencyRuleSyntax: concurrency: and lease: parse, round-trip,
// combine with limits:, and bad values are errors naming the rule.
func TestConcurrencyRuleSyntax(t *testing.T) {
	set, err := rules.Parse([]byte(`
rules:
  - {name: a, route: /a, concurrency: 3, lease: 45s}
  - {name: b, route: /b, limits: ["10 per 1m"], concurrency: 2}
  - {name: c, route: /c, limits: ["10 per 1m"]}
`))
	require.NoError(t, err)
	a, _ := set.Rule("a")
	assert.Equal(t, int64(3), a.Concurrency)
	assert.Equal(t, 45*time.Second, a.Lease)
	b, _ := set.Rule("b")
	assert.Equal(t, int64(2), b.Concurrency)
	assert.Equal(t, "10 per 1m", b.Limits[0].String())
	c, _ := set.Rule("c")
	assert.Zero(t, c.Concurrency)
	for _, tc := range []struct{ doc, want string }{
		{`{name: x, route: /x, concurrency: 0, lease: 5s}`, `rules[0] "x": lease:`},
		{`{name: x, route: /x, concurrency: -1}`, `rules[0] "x": concurrency: -1 must be between 1 and 100000`},
		{`{name: x, route: /x, concurrency: 3, lease: 500ms}`, `rules[0] "x": lease: "500ms" must be a duration between 1s`},
		{`{name: x, route: /x, concurrency: 3, lease: 48h}`, `lease: "48h" must be`},
		{`{name: x, route: /x, concurrency: 3, lease: soon}`, `lease: "soon" must be`},
		{`{name: x, route: /x, concurrency: 3, fail_mode: local}`, `rules[0] "x": concurrency: fail_mode local`},
		{`{name: x, route: /x}`, `no limits`},
	} {
		_, err := rules.Parse([]byte("rules:\n  - " + tc.doc + "\n"))
		require.Error(t, err, tc.doc)
		assert.Contains(t, err.Error(), tc.want, tc.doc)
	}
}
