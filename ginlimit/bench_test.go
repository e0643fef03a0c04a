package ginlimit_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

func engine(mw ...gin.HandlerFunc) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(mw...)
	r.GET("/bench", func(c *gin.Context) { c.Status(http.StatusOK) })
	return r
}

// BenchmarkBaseline is a gin engine routing to a trivial handler.
func BenchmarkBaseline(b *testing.B) { adaptertest.BenchHTTP(b, engine()) }

// BenchmarkMiddleware adds ginlimit (memstore, one hot key, the three
// X-RateLimit headers).
func BenchmarkMiddleware(b *testing.B) {
	adaptertest.BenchHTTP(b, engine(ginlimit.New(adaptertest.BenchLimiter(b))))
}
