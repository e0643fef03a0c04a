// Package echo5limit is the echo v5 (github.com/labstack/echo/v5)
// adapter of limitkit: a middleware that limits requests with a
// core.Limiter and answers the standard way. Package echolimit is the
// echo v4 adapter; both are supported side by side, take the same
// options and give the same answers.
//
// # Use
//
//	store := memstore.MustNew()
//	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(100)}})
//	e.Use(echo5limit.New(api))                                                // global
//	e.POST("/login", loginHandler, echo5limit.New(login, httplimit.WithKey(k))) // per route
//
// [New] panics on a configuration mistake (for start-up code);
// [NewMiddleware] returns the error. The options are package
// github.com/limitkit/limitkit/httplimit's (httplimit.WithKey,
// httplimit.WithCheck, httplimit.WithHeaders, ...), the same for every
// adapter. This package adds what is echo's: [New], [NewMiddleware],
// [WithDenyHandler], [WriteRejection] and [Identity].
//
// # Keys and scopes
//
// Each check's store key is "<scope>|<client key>". The client key
// defaults to the TCP peer address (c.Request().RemoteAddr; IPv4 /32,
// IPv6 /64), never echo's c.RealIP(), which trusts X-Forwarded-For from
// any client by default: behind a proxy give httplimit.WithIPKey a
// keyfuncs resolver that names the proxies to trust.
//
// The scope is, by default, the request method and the route pattern
// echo matched (c.Path(): e.Use middleware runs after routing): "GET
// /users/:id", so every endpoint has its own quota per client, under
// groups too (the pattern includes the group's prefix). A route of
// e.Any (echo.RouteAny) has one quota per client whatever the method
// (the scope is the route alone); HEAD is scoped as GET (echo serves
// HEAD with the GET route). A request echo routes to no route (404, 405)
// and e.Pre middleware, which runs before routing, give the empty scope:
// one quota per client across what the middleware covers.
// httplimit.WithScope and httplimit.WithScopeFunc override it.
//
// # Responses
//
// Allowed and denied responses carry X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset; a denial is 429 with
// Retry-After and an RFC 9457 problem+json body; a FailClosed store
// failure is 503 with Retry-After: 1; a request without a key under
// httplimit.WithNoKeyDeny is 403. [WithDenyHandler] replaces the whole
// denial. Outcome counting (httplimit.WithOutcome) sees the status
// written, or for an error returned unwritten the status echo's error
// handler sends (echo.StatusCode, else 500); a panic counts as a
// failure.
//
// # Framework internals
//
// The adapter reads echo only through its public API: c.Path() for the
// route, e.Router().Routes() for the routes of e.Any, and c.RouteInfo()
// when one pattern has both. Echo v5 builds its middleware chain once,
// so the middleware allocates no closure per request, and its Context
// is a struct, so the request view is the context itself.
//
// The middleware is safe for concurrent use.
package echo5limit
