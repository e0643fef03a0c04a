package fiberlimit

import (
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
	assert.Equal(t, []string{"", "/x/:id"}, routes)
}
