package nethttp

import (
	"net/http"

	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// request is the httplimit.Request view of a *http.Request: keyfuncs.FromHTTP's
// (each method calls it, which the compiler inlines), and a ServeMux
// pattern's method rule. A single pointer, so converting it to an
// interface does not allocate.
type request struct{ r *http.Request }

var (
	_ httplimit.Request      = request{}
	_ keyfuncs.HTTPRequester = request{} // keyfuncs.FormField reads the body
)

func (v request) Method() string                    { return keyfuncs.FromHTTP(v.r).Method() }
func (v request) Route() string                     { return v.r.Pattern }
func (v request) Path() string                      { return keyfuncs.FromHTTP(v.r).Path() }
func (v request) Header(name string) string         { return keyfuncs.FromHTTP(v.r).Header(name) }
func (v request) HeaderValues(name string) []string { return keyfuncs.FromHTTP(v.r).HeaderValues(name) }
func (v request) Query(name string) string          { return keyfuncs.FromHTTP(v.r).Query(name) }
func (v request) RemoteAddr() string                { return v.r.RemoteAddr }
func (v request) Value(key any) any                 { return v.r.Context().Value(key) }
func (v request) HTTP() *http.Request               { return v.r }

// AnyMethod implements httplimit.Request: a ServeMux pattern names its
// method ("GET /users/{id}", part of the scope with the route) or accepts
// every one ("/users/{id}", whose handler serves them all), so the
// request's method is never part of the scope.
func (v request) AnyMethod() bool { return true }
