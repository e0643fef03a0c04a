package nethttp

import (
	"net/http"

	"github.com/limitkit/limitkit/httplimit"
)

// WithRoute tells a middleware that runs before its router has routed the
// request (a global middleware of chi, gorilla/mux or any router that
// routes after its middleware) the route pattern the request will match:
// route returns it ("/users/{id}"), or "" when no route matches. The
// default scope is then "<METHOD> <pattern>", so each route has its own
// quota per client under one global middleware, as on the other
// adapters; requests that match no route share the empty scope. route
// runs once per request, before the decision, only when r.Pattern is
// empty (inside a ServeMux, and inside chi's per-route middleware, the
// pattern is already known and used). It must return bounded-cardinality
// patterns, never the raw path.
//
// For chi (go-chi/chi/v5 Mux.Find, which this package does not import):
//
//	r := chi.NewRouter()
//	r.Use(nethttp.New(limiter, nethttp.WithRoute(func(req *http.Request) string {
//		return r.Find(chi.NewRouteContext(), req.Method, req.URL.Path)
//	})))
//
// route must not be nil. Only this package's middleware accepts it
// (another adapter given it fails at construction). [httplimit.WithScope] and [httplimit.WithScopeFunc] take precedence
// over the pattern it returns.
func WithRoute(route func(r *http.Request) string) httplimit.Option {
	return httplimit.AdapterOption("nethttp", "WithRoute", route)
}

// routedRequest is the request view with the route WithRoute resolved:
// the router's pattern does not name its method, so the method is part
// of the scope.
type routedRequest struct {
	request
	route string
}

// Route is the pattern WithRoute's function returned.
func (r routedRequest) Route() string { return r.route }

// AnyMethod implements httplimit.Request: WithRoute's pattern does not
// say whether its route accepts every method, so the method is part of
// the scope.
func (r routedRequest) AnyMethod() bool { return false }
