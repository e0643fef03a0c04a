// Package fiber3limit is the fiber v3 (github.com/gofiber/fiber/v3)
// adapter of limitkit: a middleware that limits requests with a
// core.Limiter and answers the standard way. Package fiberlimit is the
// fiber v2 adapter; both are supported side by side, take the same
// options and give the same answers.
//
// # Use
//
//	store := memstore.MustNew()
//	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(100)}})
//	app.Use(fiber3limit.New(api))                                                  // global
//	app.Post("/login", loginHandler, fiber3limit.New(login, httplimit.WithKey(k))) // per route
//
// [New] panics on a configuration mistake (for start-up code);
// [NewMiddleware] returns the error. The options are package
// github.com/limitkit/limitkit/httplimit's (httplimit.WithKey,
// httplimit.WithCheck, httplimit.WithHeaders, ...), the same for every
// adapter. This package adds what is fiber's: [New], [NewMiddleware],
// [WithDenyHandler], [WriteRejection] and [Identity].
//
// # Keys and scopes
//
// Each check's store key is "<scope>|<client key>". The client key
// defaults to the TCP peer address (IPv4 /32, IPv6 /64), never c.IP()
// with fiber's ProxyHeader, which any client can write: behind a proxy
// give httplimit.WithIPKey a keyfuncs resolver that names the proxies to
// trust.
//
// The scope is, by default, the request method and the pattern of the
// route that serves the request: "GET /users/:id", so every endpoint
// has its own quota per client. Fiber runs app.Use middleware before it
// knows the route (c.Route() is the Use registration), so the adapter
// finds the route itself, with fiber's public API only: the app's
// routes (app.Stack and app.GetRoutes), tried in fiber's order for the
// request's method with fiber.RoutePatternMatch under the app's
// CaseSensitive and StrictRouting, within fiber's three-byte buckets (a
// route whose leading literal has three bytes or more serves only paths
// that start with them; route_diff_test.go checks the answer against
// fiber's router). Group and mount prefixes are part of
// the pattern. A route of app.All (every method of the app's
// RequestMethods) has one quota per client whatever the method; HEAD is
// scoped as GET. A request no route serves (fiber's 404) gets the empty
// scope: one quota per client across what the middleware covers.
// httplimit.WithScope and httplimit.WithScopeFunc override it.
//
// The route found for a (method, path) is remembered in a fixed table of
// 1024 entries; a path not remembered costs a scan of its method's
// routes, each matched by fiber.RoutePatternMatch (which parses the
// pattern: a few hundred nanoseconds a route). A client sending a new
// path every request pays that scan every request: an app with very
// many routes and an exposed global limiter should prefer per-route
// middleware, whose route fiber names (c.Route()) at no cost.
//
// # Responses
//
// Allowed and denied responses carry X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset; a denial is 429 with
// Retry-After and an RFC 9457 problem+json body; a FailClosed store
// failure is 503 with Retry-After: 1; a request without a key under
// httplimit.WithNoKeyDeny is 403. [WithDenyHandler] replaces the whole
// denial. Outcome counting (httplimit.WithOutcome) sees a returned
// *fiber.Error's code (other errors: 500), else the status written; a
// bare 200 without a body counts as unwritten; a panic as a failure.
//
// The middleware is safe for concurrent use. It reads the app's routes
// when it first serves a request of the app (and again when it meets a
// route registered since): register routes before serving, as fiber
// requires.
package fiber3limit
