package ginlimit

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/httplimit"
)

// TestKeyPartsAgree: the view's KeyParts are its scope's method, Route
// and RemoteAddr, for a routed request, HEAD, a route of r.Any, a 404, a
// 405 and an odd method (the key cache keys by them instead of the three
// calls).
func TestKeyPartsAgree(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	var n int
	e.Use(func(c *gin.Context) {
		v := (*request)(c)
		p, ok := v.KeyParts(true)
		require.True(t, ok)
		assert.Equal(t, [3]string{httplimit.ScopeMethod(v), v.Route(), v.RemoteAddr()}, [3]string{p.Method, p.Route, p.Peer})
		assert.True(t, p.StableRoute)
		p, ok = v.KeyParts(false)
		require.True(t, ok)
		assert.Equal(t, [3]string{"", "", v.RemoteAddr()}, [3]string{p.Method, p.Route, p.Peer})
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
