package fiberlimit_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"fmt"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/fiberlimit"
)

// show serves one request through app.Test (whose peer is 0.0.0.0).
func show(app *fiber.App, method, target string) {
	resp, err := app.Test(httptest.NewRequest(method, target, nil), -1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Printf("%s %s -> %d", method, target, resp.StatusCode)
	for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if v := resp.Header.Get(k); v != "" {
			fmt.Printf(" %s=%s", k, v)
		}
	}
	fmt.Println()
}

// Per-route limits: the middleware is the first handler of the route, so
// keys carry the pattern ("/users/:id"): /users/1 and /users/2 share one
// quota per client. The client is the TCP peer, never c.IP().
func ExampleNew() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0)) // a real server omits the clocks
	store := memstore.MustNew()
	defer store.Close()
	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))

	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/users/:id", fiberlimit.New(api, httplimit.WithClock(clock)), func(c *fiber.Ctx) error {
		return c.SendString("user " + c.Params("id"))
	})

	show(app, "GET", "/users/1")
	show(app, "GET", "/users/2")
	show(app, "GET", "/users/3")
	// Output:
	// GET /users/1 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=1700000030
	// GET /users/2 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060
	// GET /users/3 -> 429 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060 Retry-After=30
}

// A global limit with app.Use: fiber runs it before choosing the final
// route, so the middleware looks the route up among the app's routes:
// each endpoint has its own quota per client, as on the other adapters,
// and requests no route serves share one "unmatched" quota.
func ExampleNew_global() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	global := core.MustNewLimiter(store, core.Policy{Name: "global", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))

	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(fiberlimit.New(global, httplimit.WithResetDelta()))
	app.Get("/a", func(c *fiber.Ctx) error { return c.SendString("a") })
	app.Get("/users/:id", func(c *fiber.Ctx) error { return c.SendString("user") })

	show(app, "GET", "/a")
	show(app, "GET", "/a")
	show(app, "GET", "/a")
	show(app, "GET", "/users/1")
	show(app, "GET", "/nowhere")
	// Output:
	// GET /a -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=30
	// GET /a -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=60
	// GET /a -> 429 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=60 Retry-After=30
	// GET /users/1 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=30
	// GET /nowhere -> 404 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=30
}
