package httplimit

import (
	"context"
	"net/http"

	"github.com/limitkit/limitkit/keyfuncs"
)

// httpView is net/http's view for the tests, as nethttp's: keyfuncs.FromHTTP's,
// and a ServeMux pattern names its method or accepts every one. A single
// pointer, so converting it to a Request does not allocate.
type httpView struct{ r *http.Request }

func (v httpView) Method() string            { return keyfuncs.FromHTTP(v.r).Method() }
func (v httpView) Route() string             { return keyfuncs.FromHTTP(v.r).Route() }
func (v httpView) Path() string              { return keyfuncs.FromHTTP(v.r).Path() }
func (v httpView) Header(name string) string { return keyfuncs.FromHTTP(v.r).Header(name) }
func (v httpView) HeaderValues(name string) []string {
	return keyfuncs.FromHTTP(v.r).HeaderValues(name)
}
func (v httpView) Query(name string) string { return keyfuncs.FromHTTP(v.r).Query(name) }
func (v httpView) RemoteAddr() string       { return keyfuncs.FromHTTP(v.r).RemoteAddr() }
func (v httpView) Value(key any) any        { return keyfuncs.FromHTTP(v.r).Value(key) }
func (v httpView) HTTP() *http.Request      { return v.r }
func (v httpView) AnyMethod() bool          { return true }

// decide is e.Decide into a fresh Result.
func decide(e *Engine, ctx context.Context, req Request) Result {
	var res Result
	e.Decide(ctx, req, nil, &res)
	return res
}
