package fiberlimit

import (
	"fmt"
	"hash/maphash"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The table's isUse tells app.Use routes from real ones on the fiber
// version in go.mod, and a view in any Use handler resolves the route
// fiber will run.
func TestIsUseTellsUseRoutes(t *testing.T) {
	app := fiber.New()
	var seen []bool
	var routes []string
	app.Use(func(c *fiber.Ctx) error {
		seen = append(seen, appTable(c.App()).isUse(c.Route()))
		routes = append(routes, (*request)(c).Route())
		return c.Next()
	})
	app.Get("/x/:id", func(c *fiber.Ctx) error {
		seen = append(seen, appTable(c.App()).isUse(c.Route()))
		routes = append(routes, (*request)(c).Route())
		return nil
	})
	resp, err := app.Test(httptest.NewRequest("GET", "/x/1", nil))
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, []bool{true, false}, seen)
	assert.Equal(t, []string{"/x/:id", "/x/:id"}, routes)
}

// TestUseRoutesMatchesFibersFlag: useRoutes, built from fiber's public
// GetRoutes(true), finds exactly the routes fiber flags as Use (its
// unexported field, read here by reflect, test-only) in an app with
// global, prefixed, group and mounted Use handlers, app.All, merged
// registrations and the same handlers given to a Use and a route.
func TestUseRoutesMatchesFibersFlag(t *testing.T) {
	h := func(c *fiber.Ctx) error { return c.Next() }
	shared := []fiber.Handler{h}
	sharedArgs := []any{"/deep", h}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(h)
	app.Get("/a", h)
	app.Get("/a", h) // merged into the previous route
	app.Use("/api", h)
	app.Use("/api", h) // merged
	app.Get("/api/:id", h)
	app.All("/all", h)
	g := app.Group("/g", h)
	g.Use(h)
	g.Get("/x", h)
	g.Use(sharedArgs...)
	g.Get("/deep", shared...)
	sub := fiber.New()
	sub.Use(h)
	sub.Get("/s/:p", h)
	app.Mount("/m", sub)
	app.Static("/static", ".")
	app.Get("/after", h)

	isUseRoute := map[*fiber.Route]bool{}
	for _, r := range useRoutes(app) {
		isUseRoute[r] = true
	}
	var want, got []string // "method path #position" of each Use route
	for _, rs := range app.Stack() {
		for i, r := range rs {
			f := reflect.ValueOf(r).Elem().FieldByName("use")
			require.True(t, f.IsValid() && f.Kind() == reflect.Bool,
				"fiber.Route has no bool field \"use\" any more: this test's reference is gone; "+
					"find how the new fiber marks Use routes and check useRoutes (routes.go) against it")
			name := fmt.Sprintf("%s %s #%d", r.Method, r.Path, i)
			if f.Bool() {
				want = append(want, name)
			}
			if isUseRoute[r] {
				got = append(got, name)
			}
		}
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, got, "useRoutes disagrees with fiber's Use flag: fiber's GetRoutes(true) "+
		"or its route list changed; fix useRoutes in routes.go")
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
		tb := buildTable(app, routeCount(app), true)
		for i := 0; i < n; i++ {
			assert.Equal(t, fmt.Sprintf("/s%d", i), tb.match("GET", fmt.Sprintf("/s%d", i)), "n=%d", n)
			assert.Equal(t, fmt.Sprintf("/s%d", i), tb.match("GET", fmt.Sprintf("/S%d/", i)), "n=%d folded", n)
		}
		assert.Equal(t, "", tb.match("GET", fmt.Sprintf("/s%d", n)), "n=%d", n)
		assert.Equal(t, "", tb.match("POST", "/s0"), "n=%d", n)
		// the folded lookup reads a stack buffer as the key: no copy
		if !raceEnabled {
			allocs := testing.AllocsPerRun(100, func() { _ = tb.match("GET", "/S1/A-PATH-LONGER-THAN-THIRTY-TWO-BYTES") })
			assert.Zero(t, allocs, "n=%d folded lookup allocates", n)
		}
	}
}

// TestPeerCache: a peer rendered again is the very string of the first
// time, with no allocation; a different peer in the same slot replaces
// it; an address too long to cache is still returned right.
func TestPeerCache(t *testing.T) {
	pc := &peerCache{seed: maphash.MakeSeed()}
	a := pc.intern([]byte("203.0.113.7:4711"))
	b := pc.intern([]byte("203.0.113.7:4711"))
	assert.Equal(t, "203.0.113.7:4711", a)
	assert.Equal(t, unsafe.StringData(a), unsafe.StringData(b), "a returning peer gets the cached string")
	buf := []byte("203.0.113.8:4711")
	s := pc.intern(buf)
	buf[0] = 'X'
	assert.Equal(t, "203.0.113.8:4711", s, "the cache never aliases the caller's buffer")
	for i := 0; i < 3*peerSlots; i++ { // more peers than slots: they share
		addr := fmt.Sprintf("10.%d.%d.1:80", i/256, i%256)
		require.Equal(t, addr, pc.intern([]byte(addr)), "a peer is never answered with another's string")
	}
	long := strings.Repeat("a", peerMax+1)
	assert.Equal(t, long, pc.intern([]byte(long)))
	assert.Equal(t, "", pc.intern(nil))
	if !raceEnabled {
		in := []byte("198.51.100.1:80")
		pc.intern(in)
		assert.Zero(t, testing.AllocsPerRun(100, func() { _ = pc.intern(in) }))
	}
}
