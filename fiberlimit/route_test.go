package fiberlimit

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isUse reads fiber.Route's unexported flag at its reflected offset: it
// must tell app.Use routes from real ones on the fiber version in go.mod.
func TestIsUseReadsTheFlag(t *testing.T) {
	require.NotEqual(t, ^uintptr(0), useOffset, "fiber.Route has no bool field \"use\" any more")
	app := fiber.New()
	var seen []bool
	var routes []string
	app.Use(func(c *fiber.Ctx) error {
		seen = append(seen, isUse(c.Route()))
		routes = append(routes, (*request)(c).Route())
		return c.Next()
	})
	app.Get("/x/:id", func(c *fiber.Ctx) error {
		seen = append(seen, isUse(c.Route()))
		routes = append(routes, (*request)(c).Route())
		return nil
	})
	resp, err := app.Test(httptest.NewRequest("GET", "/x/1", nil))
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, []bool{true, false}, seen)
	// a view in any Use handler resolves the route fiber will run
	assert.Equal(t, []string{"/x/:id", "/x/:id"}, routes)
}

// TestAppTableManyApps: the shared table cache holds eight apps; with
// more served in turn, every request still gets its own app's route, and
// an app served again and again is not rebuilt.
func TestAppTableManyApps(t *testing.T) {
	var apps []*fiber.App
	for i := 0; i < 2*len(appTables)+3; i++ {
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Get(fmt.Sprintf("/app%d/:id", i), func(c *fiber.Ctx) error { return nil })
		apps = append(apps, app)
	}
	for round := 0; round < 3; round++ {
		for i, app := range apps {
			assert.Equal(t, fmt.Sprintf("/app%d/:id", i), appTable(app).match("GET", fmt.Sprintf("/app%d/7", i)))
			assert.Equal(t, "", appTable(app).match("GET", fmt.Sprintf("/app%d/7", i+1)))
		}
	}
	before := routeBuilds.Load()
	for i := 0; i < 100; i++ {
		require.Equal(t, "/app0/:id", appTable(apps[0]).match("GET", "/app0/1"))
	}
	assert.LessOrEqual(t, routeBuilds.Load()-before, int64(1), "built at most once")
	apps[0].Get("/new", func(c *fiber.Ctx) error { return nil })
	assert.Equal(t, "/new", appTable(apps[0]).match("GET", "/new"), "a new route is seen")
}

// TestStaticRoutesFewAndMany: static routes are found by a scan when a
// method has few, by the map when it has many, alike (first registration
// wins, case folded unless CaseSensitive).
func TestStaticRoutesFewAndMany(t *testing.T) {
	for _, n := range []int{1, fewStatic, fewStatic + 1, 3 * fewStatic} {
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		for i := 0; i < n; i++ {
			app.Get(fmt.Sprintf("/s%d", i), func(c *fiber.Ctx) error { return nil })
		}
		app.Get("/S0", func(c *fiber.Ctx) error { return nil }) // same detection path: the first serves
		tb := buildTable(app, routeCount(app))
		for i := 0; i < n; i++ {
			assert.Equal(t, fmt.Sprintf("/s%d", i), tb.match("GET", fmt.Sprintf("/s%d", i)), "n=%d", n)
			assert.Equal(t, fmt.Sprintf("/s%d", i), tb.match("GET", fmt.Sprintf("/S%d/", i)), "n=%d folded", n)
		}
		assert.Equal(t, "", tb.match("GET", fmt.Sprintf("/s%d", n)), "n=%d", n)
		assert.Equal(t, "", tb.match("POST", "/s0"), "n=%d", n)
	}
}
