package echolimit

import (
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"
)

var (
	sinkHandler echo.HandlerFunc
	sinkPtr     uintptr
)

// BenchmarkWrapCache is what the handler cache buys where echo applies
// the middleware per request: the cached handler against a new closure
// each time (what the middleware costs without funcptr.go's identity).
func BenchmarkWrapCache(b *testing.B) {
	route := func(c echo.Context) error { return nil }
	build := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return next(c) }
	}
	b.Run("cached", func(b *testing.B) {
		mw := new(wrapCache).middleware(build)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkHandler = mw(route)
		}
	})
	b.Run("built", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkHandler = build(route)
		}
	})
}

// BenchmarkCodePtr is unrouted's code pointer read directly against
// reflect's spelling of it.
func BenchmarkCodePtr(b *testing.B) {
	h := echo.NotFoundHandler
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sinkPtr = codePtr(h)
		}
	})
	b.Run("reflect", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sinkPtr = reflect.ValueOf(h).Pointer()
		}
	})
}
