package ginlimit

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeyPartsAgree: the view's KeyParts are the request's method, its
// Route and RemoteAddr, and as Table the ID of the routes that say
// whether the route accepts every method (none for no route), for a
// routed request, HEAD, a route of r.Any, a 404, a 405 and an odd method
// (the key cache keys by them instead of the three calls; the scope is a
// function of them: keycache_diff_test.go).
func TestKeyPartsAgree(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	var n int
	e.Use(func(c *gin.Context) {
		v := (*request)(c)
		p, ok := v.KeyParts(true)
		require.True(t, ok)
		assert.Equal(t, [3]string{v.Method(), v.Route(), v.RemoteAddr()}, [3]string{p.Method, p.Route, p.Peer})
		if p.Route != "" {
			assert.Equal(t, anyRoutes.Table(engineOf(c)), p.Table)
			assert.NotZero(t, p.Table)
		} else {
			assert.Zero(t, p.Table)
		}
		assert.True(t, p.StableRoute)
		p, ok = v.KeyParts(false)
		require.True(t, ok)
		assert.Equal(t, [3]string{"", "", v.RemoteAddr()}, [3]string{p.Method, p.Route, p.Peer})
		assert.Zero(t, p.Table)
		n++
	})
	e.GET("/items/:id", func(c *gin.Context) {})
	e.Any("/any", func(c *gin.Context) {})
	for _, rq := range [][2]string{{"GET", "/items/1"}, {"HEAD", "/items/1"}, {"POST", "/items/1"}, {"GET", "/nope"}, {"FOO", "/items/1"}, {"PUT", "/any"}} {
		r := httptest.NewRequest(rq[0], rq[1], nil)
		r.RemoteAddr = "192.0.2.1:5"
		e.ServeHTTP(httptest.NewRecorder(), r)
	}
	assert.Equal(t, 6, n)
}
