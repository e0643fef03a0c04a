package ginlimit

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"unsafe"

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
		"field engine (engineOf in engine.go). Run TestEngineOfReadsTheServingEngine and the "+
		"conformance suite on the new gin, then set verifiedGin to %s", gin.Version)
}

// TestEngineOfReadsTheServingEngine: the unexported field exists with
// the expected type, and engineOf returns the engine serving the request
// (without it, r.Any routes would silently get one quota per method).
func TestEngineOfReadsTheServingEngine(t *testing.T) {
	require.NotEqual(t, ^uintptr(0), engineOffset,
		"gin.Context has no field \"engine\" of type *gin.Engine any more: find the new way from a "+
			"*gin.Context to its *gin.Engine (or a public accessor) and fix engineOf in engine.go")
	gin.SetMode(gin.TestMode)
	for i := 0; i < 2; i++ {
		r := gin.New()
		var got *gin.Engine
		r.GET("/x", func(c *gin.Context) { got = engineOf(c); c.Status(http.StatusOK) })
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		assert.Same(t, r, got, "engineOf must return the engine serving the request")
	}
}

var sinkEngine uintptr

// BenchmarkEngineOf is what reading the engine by its offset buys
// against reflect's safe read of the same field (which yields only an
// address: reflect will not hand out an unexported field's value).
func BenchmarkEngineOf(b *testing.B) {
	r := gin.New()
	c := gin.CreateTestContextOnly(httptest.NewRecorder(), r)
	b.Run("offset", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkEngine = uintptr(unsafe.Pointer(engineOf(c)))
		}
	})
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkEngine = reflect.ValueOf(c).Elem().FieldByName("engine").Pointer()
		}
	})
}
