package ginlimit

import (
	"reflect"
	"unsafe"

	"github.com/gin-gonic/gin"
)

// This file holds ginlimit's one framework trick. Whether a route
// accepts every method (r.Any) is read from gin's public API,
// Engine.Routes(); but gin.Context exports no way to the Engine that
// matched the request, so the engine is read from the context's
// unexported field, found by name and type through reflect once. A gin
// whose Context lacks that field gets nil here: every route is then
// method-specific (the default before r.Any had one scope), never a
// crash. engine_test.go measures the read against reflect's.

// engineOffset is the offset in gin.Context of its unexported engine
// field, the only way from a request to the routes it was matched among
// (gin.Context exports no Engine); found by reflect once and checked to
// be a *gin.Engine, ^0 if a gin version lacks it: every route is then
// method-specific, as before r.Any had one scope.
var engineOffset = func() uintptr {
	f, ok := reflect.TypeOf(gin.Context{}).FieldByName("engine")
	if !ok || f.Type != reflect.TypeOf((*gin.Engine)(nil)) || len(f.Index) != 1 {
		return ^uintptr(0)
	}
	return f.Offset
}()

func engineOf(c *gin.Context) *gin.Engine {
	if engineOffset == ^uintptr(0) {
		return nil
	}
	return *(**gin.Engine)(unsafe.Add(unsafe.Pointer(c), engineOffset))
}
