package fiber3limit_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/fiber3limit"
	"github.com/limitkit/limitkit/httplimit"
)

func show(app *fiber.App, method, target string) {
	resp, err := app.Test(httptest.NewRequest(method, target, nil))
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

// A global limit with app.Use: each route keeps its own quota per client
// (the adapter finds the route among the app's routes), and the client
// is the TCP peer.
func ExampleNew() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0)) // a real server omits the clocks
	store := memstore.MustNew()
	defer store.Close()
	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))

	app := fiber.New()
	app.Use(fiber3limit.New(api, httplimit.WithClock(clock)))
	app.Get("/users/:id", func(c fiber.Ctx) error { return c.SendString("user " + c.Params("id")) })
	app.Get("/health", func(c fiber.Ctx) error { return c.SendString("up") })

	show(app, "GET", "/users/1")
	show(app, "GET", "/users/2")
	show(app, "GET", "/users/3")
	show(app, "GET", "/health")
	// Output:
	// GET /users/1 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=1700000030
	// GET /users/2 -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060
	// GET /users/3 -> 429 X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=1700000060 Retry-After=30
	// GET /health -> 200 X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=1700000030
}

// A configuration mistake fails at construction, naming what to fix.
func ExampleNewMiddleware() {
	store := memstore.MustNew()
	defer store.Close()
	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}})
	_, err := fiber3limit.NewMiddleware(api, httplimit.WithKey(nil))
	fmt.Println(err != nil)
	// Output:
	// true
}
