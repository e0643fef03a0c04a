package echolimit_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/echolimit"
)

func show(h http.Handler, method, target, peer string) {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = peer
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Printf("%s %s -> %d", method, target, w.Code)
	for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if v := w.Header().Get(k); v != "" {
			fmt.Printf(" %s=%s", k, v)
		}
	}
	fmt.Println()
}

// A global limit with e.Use: echo routes first, so keys carry c.Path() and
// each endpoint keeps its own quota per client. The client is the TCP peer,
// not c.RealIP().
func ExampleNew() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0)) // a real server omits the clocks
	store := memstore.MustNew()
	defer store.Close()
	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))

	e := echo.New()
	e.Use(echolimit.New(api, httplimit.WithClock(clock)))
	e.GET("/users/:id", func(c echo.Context) error { return c.String(http.StatusOK, "user "+c.Param("id")) })

	show(e, "GET", "/users/1", "203.0.113.7:1234")
	show(e, "GET", "/users/2", "203.0.113.7:1234")
	show(e, "GET", "/users/3", "203.0.113.7:1234")
	// Output:
	// GET /users/1 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=1700000030
	// GET /users/2 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060
	// GET /users/3 -> 429 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060 Retry-After=30
}

// A per-route limit: the middleware is given to one route.
func ExampleNew_perRoute() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	login := core.MustNewLimiter(store, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(1)}}, core.WithClock(clock))

	e := echo.New()
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome") },
		echolimit.New(login, httplimit.WithResetDelta()))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "home") })

	show(e, "POST", "/login", "203.0.113.7:1234")
	show(e, "POST", "/login", "203.0.113.7:1234")
	show(e, "GET", "/", "203.0.113.7:1234")
	// Output:
	// POST /login -> 200 X-RateLimit-Limit=1 X-RateLimit-Remaining=0 X-RateLimit-Reset=60
	// POST /login -> 429 X-RateLimit-Limit=1 X-RateLimit-Remaining=0 X-RateLimit-Reset=60 Retry-After=60
	// GET / -> 200
}
