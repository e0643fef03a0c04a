package httplimit

import (
	"net/http"
	"strings"

	"github.com/limitkit/limitkit/keyfuncs"
)

// Request is the view of a request an adapter gives [Engine.Decide]: what
// the key functions read (keyfuncs.Request), and whether the route the
// request matched accepts every method. That second part is the adapter's
// contract, not an option: gin's r.Any, echo's e.Any and fiber's app.All
// register one path under every method, net/http's ServeMux pattern
// without a method serves them all, and such a route has one quota per
// client whatever the method — a view that answered false for it would hand
// a client one quota per method (9 with gin's Any). The conformance suite
// (httplimit/adaptertest) checks it. A view must be safe to read from the
// goroutine serving the request; Decide reads it only during the call.
type Request interface {
	keyfuncs.Request
	// AnyMethod reports whether the matched route accepts every method
	// (registered under every method the framework's "any" registration
	// uses, or a pattern that names no method): the request's scope is
	// then the route alone.
	AnyMethod() bool
}

// scopeMethod is the method part of req's default scope, for a route
// that does not name its method itself: "" when the route accepts every
// method (the view's [Request.AnyMethod] says so: a net/http ServeMux
// pattern without a method, gin's r.Any); otherwise the
// request's method, with HEAD as GET (a GET route serves HEAD: net/http
// and fiber route HEAD to it, and a client must not get a second quota by
// asking for headers only) and methods outside RFC 9110 and PATCH as
// "OTHER", so a client inventing methods cannot mint new namespaces.
func scopeMethod(req Request) string {
	if req.AnyMethod() {
		return ""
	}
	return normalMethod(req.Method())
}

// normalMethod is m as a scope names it: HEAD as GET, m when it is
// another RFC 9110 method or PATCH, else "OTHER".
func normalMethod(m string) string {
	switch m {
	case http.MethodHead:
		return http.MethodGet
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// appendScope appends the key namespace: the fixed scope, the scope
// function's result, or by default "METHOD route" ("GET /users/:id"). A
// route that already names its method or a host (net/http's
// "GET /users/{id}", "example.com/x") is used as is; a route that accepts
// every method (see scopeMethod) is the route alone ("/api2"); another
// route starting with "/" gets the method prepended; an unknown route ("")
// gives the empty scope.
func (e *Engine) appendScope(b []byte, req Request) []byte {
	if e.scopeFixed {
		return append(b, e.scope...)
	}
	if e.cfg.scopeFunc != nil {
		return append(b, e.cfg.scopeFunc(req)...)
	}
	route := req.Route()
	if route == "" {
		return b
	}
	if strings.IndexByte(route, ' ') >= 0 || route[0] != '/' {
		return append(b, route...)
	}
	if m := scopeMethod(req); m != "" {
		b = append(b, m...)
		b = append(b, ' ')
	}
	return append(b, route...)
}

// RouteScope is the default scope (see [StoreKey]) of a request with
// method on route, the pattern the router matched ("/users/:id",
// net/http's "GET /users/{id}"): the route alone when it names its
// method or a host, or when method is "" (a route that accepts every
// method, as a view's [Request.AnyMethod] says); otherwise the method as
// a scope names it (HEAD as GET; a method outside RFC 9110 and PATCH as
// "OTHER"), a space and the route. An empty route is the
// empty scope.
func RouteScope(method, route string) string {
	if route == "" || strings.IndexByte(route, ' ') >= 0 || route[0] != '/' || method == "" {
		return route
	}
	return normalMethod(method) + " " + route
}
