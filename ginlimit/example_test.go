package ginlimit_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/ginlimit"
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

// A global limit with r.Use. Each route keeps its own quota per client
// (keys carry c.FullPath()), so /users/1 and /users/2 share one and /health
// would have another. The client is the TCP peer: the spoofed
// X-Forwarded-For that c.ClientIP() would believe is ignored.
func ExampleNew() {
	gin.SetMode(gin.ReleaseMode)
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0)) // a real server omits the clocks
	store := memstore.MustNew()
	defer store.Close()
	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))

	r := gin.New()
	r.Use(ginlimit.New(api, httplimit.WithClock(clock)))
	r.GET("/users/:id", func(c *gin.Context) { c.String(http.StatusOK, "user "+c.Param("id")) })

	show(r, "GET", "/users/1", "203.0.113.7:1234")
	show(r, "GET", "/users/2", "203.0.113.7:1234")
	show(r, "GET", "/users/3", "203.0.113.7:1234")
	// Output:
	// GET /users/1 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=1700000030
	// GET /users/2 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060
	// GET /users/3 -> 429 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060 Retry-After=30
}

// A per-route limit: the middleware is the first handler of one route.
func ExampleNew_perRoute() {
	gin.SetMode(gin.ReleaseMode)
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	login := core.MustNewLimiter(store, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(1)}}, core.WithClock(clock))

	r := gin.New()
	r.POST("/login", ginlimit.New(login, httplimit.WithResetDelta()), func(c *gin.Context) { c.String(http.StatusOK, "welcome") })
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "home") })

	show(r, "POST", "/login", "203.0.113.7:1234")
	show(r, "POST", "/login", "203.0.113.7:1234")
	show(r, "GET", "/", "203.0.113.7:1234")
	// Output:
	// POST /login -> 200 X-RateLimit-Limit=1 X-RateLimit-Remaining=0 X-RateLimit-Reset=60
	// POST /login -> 429 X-RateLimit-Limit=1 X-RateLimit-Remaining=0 X-RateLimit-Reset=60 Retry-After=60
	// GET / -> 200
}
