package ginlimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verifiedGin is the gin version whose unexported Context.engine field
// engineOf was checked against. A different version in go.mod fails
// TestGinVersionVerified until someone has run this file's tests on it
// and updated the constant.
const verifiedGin = "v1.12.0"

// TestGinVersionVerified fails on the first build with another gin: the
// package reads gin.Context's unexported engine field (see engineOf), so
// a gin upgrade must be checked, not assumed.
func TestGinVersionVerified(t *testing.T) {
	require.Equal(t, verifiedGin, gin.Version, "gin was upgraded: ginlimit reads gin.Context's unexported "+
		"field engine (engineOf in ginlimit.go). Run TestEngineOfReadsTheServingEngine and the "+
		"conformance suite on the new gin, then set verifiedGin to %s", gin.Version)
}

// TestEngineOfReadsTheServingEngine: the unexported field exists with
// the expected type, and engineOf returns the engine serving the request
// (without it, r.Any routes would silently get one quota per method).
func TestEngineOfReadsTheServingEngine(t *testing.T) {
	require.NotEqual(t, ^uintptr(0), engineOffset,
		"gin.Context has no field \"engine\" of type *gin.Engine any more: find the new way from a "+
			"*gin.Context to its *gin.Engine (or a public accessor) and fix engineOf in ginlimit.go")
	gin.SetMode(gin.TestMode)
	for i := 0; i < 2; i++ {
		r := gin.New()
		var got *gin.Engine
		r.GET("/x", func(c *gin.Context) { got = engineOf(c); c.Status(http.StatusOK) })
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		assert.Same(t, r, got, "engineOf must return the engine serving the request")
	}
}
