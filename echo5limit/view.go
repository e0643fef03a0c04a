package echo5limit

import (
	"net/http"
	"sync/atomic"

	"github.com/labstack/echo/v5"

	"github.com/limitkit/limitkit/keyfuncs"
)

// request is the keyfuncs.Request view of an echo context: echo v5's
// Context is a struct, so the view is the context itself under another
// method set (a pointer conversion: nothing allocated, nothing pooled).
// Key functions never retain the view (keyfuncs.Request's contract).
type request echo.Context

var _ keyfuncs.Request = (*request)(nil)

func (r *request) ctx() *echo.Context { return (*echo.Context)(r) }

func (r *request) Method() string { return r.ctx().Request().Method }

// Route is echo's matched route pattern (c.Path()), or "" when echo
// routed the request to no route or has not routed it yet (e.Pre
// middleware). For a path that matches no route echo leaves c.Path()
// empty; for a path whose route has no handler for the method (405, or
// echo's automatic OPTIONS answer) it names the route's pattern, which
// would charge a method the route does not serve to the route's quota:
// the router marks those requests with the Allow header's value in the
// context (echo.ContextKeyHeaderAllow), and they get the empty
// ("unmatched") scope, as on the other adapters.
func (r *request) Route() string {
	c := r.ctx()
	if c.Get(echo.ContextKeyHeaderAllow) != nil {
		return ""
	}
	return c.Path()
}

// AnyMethod implements httplimit.Request: whether the matched
// route is echo's e.Any (or g.Any) registration, a route of
// echo.RouteAny (its scope is then the route alone).
func (r *request) AnyMethod() bool {
	c := r.ctx()
	route := r.Route()
	e := c.Echo()
	if route == "" || e == nil {
		return false
	}
	switch anyKindOf(e, route) {
	case anyOnly:
		return true
	case anyMixed: // Any and method routes on one path: ask the context
		return c.RouteInfo().Method == echo.RouteAny
	}
	return false
}

func (r *request) Path() string { return r.ctx().Request().URL.Path }

func (r *request) Header(name string) string { return r.ctx().Request().Header.Get(name) }

func (r *request) HeaderValues(name string) []string { return r.ctx().Request().Header.Values(name) }

func (r *request) Query(name string) string { return query(r.ctx().Request(), name) }

// RemoteAddr is the TCP peer, not c.RealIP().
func (r *request) RemoteAddr() string { return r.ctx().Request().RemoteAddr }

// Value looks in the echo context's store (c.Set, string keys), then in
// the request's context.
func (r *request) Value(key any) any {
	if s, ok := key.(string); ok {
		if v := r.ctx().Get(s); v != nil {
			return v
		}
	}
	return r.ctx().Request().Context().Value(key)
}

// HTTP implements keyfuncs.HTTPRequester: keyfuncs.FormField reads the
// body through it.
func (r *request) HTTP() *http.Request { return r.ctx().Request() }

// anyKind says how a route pattern is registered on one Echo.
type anyKind uint8

const (
	anyNone  anyKind = iota // only under methods
	anyOnly                 // only under echo.RouteAny
	anyMixed                // both
)

// anyTable is what one Echo's router has registered, by pattern. It is
// immutable once published.
type anyTable struct {
	e     *echo.Echo
	paths map[string]anyKind
}

// anyTables holds the table of the Echo last asked about: a process
// serves one Echo almost always; several take turns (time, never a wrong
// answer).
var anyTables atomic.Pointer[anyTable]

// anyKindOf is how route is registered on e's router, from the table,
// rebuilt (from e.Router().Routes(), echo's public listing) when it is
// another Echo's or does not know route (a route added later). A route
// still unknown after the rebuild is recorded as method-only, so it
// costs one rebuild, not one per request. Routes come from the router,
// never from the client, so the table is bounded by the routes.
func anyKindOf(e *echo.Echo, route string) anyKind {
	if t := anyTables.Load(); t != nil && t.e == e {
		if k, ok := t.paths[route]; ok {
			return k
		}
	}
	t := &anyTable{e: e, paths: map[string]anyKind{}}
	methods := map[string]bool{}
	for _, ri := range e.Router().Routes() {
		if ri.Method == echo.RouteAny {
			if t.paths[ri.Path] == anyNone && methods[ri.Path] {
				t.paths[ri.Path] = anyMixed
			} else if t.paths[ri.Path] == anyNone {
				t.paths[ri.Path] = anyOnly
			}
			continue
		}
		methods[ri.Path] = true
		if t.paths[ri.Path] == anyOnly {
			t.paths[ri.Path] = anyMixed
		} else if _, ok := t.paths[ri.Path]; !ok {
			t.paths[ri.Path] = anyNone
		}
	}
	if _, ok := t.paths[route]; !ok {
		t.paths[route] = anyNone
	}
	anyTables.Store(t)
	return t.paths[route]
}
