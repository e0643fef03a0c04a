// Package ginlimit is the gin adapter of limitkit: a middleware that
// limits requests with a core.Limiter and answers the standard way.
//
// # Use
//
//	store := memstore.MustNew()
//	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(100)}})
//	r.Use(ginlimit.New(api))                       // global
//	r.POST("/login", ginlimit.New(login), loginHandler) // per route
//
// [New] panics on a configuration mistake (for start-up code);
// [NewMiddleware] returns the error. Every option is package
// github.com/limitkit/limitkit/httplimit's ([httplimit.Option],
// [httplimit.WithKey], [httplimit.WithTiers], ...), spelled the same for
// nethttp, ginlimit, echolimit and fiberlimit, so moving between frameworks
// changes only the constructor's package; httplimit's documentation shows
// every option, field and constant. This package adds what is framework-specific:
// [New], [NewMiddleware], [WithDenyHandler] and
// [WriteRejection].
//
// # Keys
//
// Each check's store key is "<scope>|<client key>". The client key comes
// from [httplimit.WithKey] / [httplimit.WithIPKey] and defaults to keyfuncs.PeerIP(): the TCP
// peer address, IPv4 /32, IPv6 /64. The default deliberately ignores
// gin's c.ClientIP(): with the framework's defaults those trust X-Forwarded-For,
// which any client can write, so a client rotating that header would get a
// fresh quota per request (and could spend a victim's). Behind a proxy, say
// which proxies to trust:
//
//	xff, err := keyfuncs.XForwardedFor("10.0.0.0/8") // an error names a bad CIDR
//	...
//	mw := New(limiter, httplimit.WithIPKey(xff))
//
// The scope is, by default, the request method and the route pattern the
// framework matched (c.FullPath()): "GET /users/:id", so every endpoint has
// its own quota per client and "/users/1" and "/users/2" share one. A
// path registered under every method (r.Any) has one quota per client
// whatever the method (the scope is the route alone); HEAD is scoped as
// GET. The middleware learns which routes are registered under every
// method from the engine's Routes (read from the context once per route
// pattern). An
// unknown route (no route matched) gives the empty scope: one quota per client
// across the routes the middleware covers. [httplimit.WithScope] and [httplimit.WithScopeFunc]
// override it. Stores keep separate state per policy, so two middlewares
// with different policies never share quota either.
//
// A key function that finds no key (an anonymous request to a user check)
// falls back to the peer IP ([httplimit.WithFallbackKey], the default), or skips
// the check ([httplimit.WithNoKeySkip]) or denies ([httplimit.WithNoKeyDeny]). A
// no-key denial is 403, not 429: it claims no quota. A server on a Unix socket
// has no peer IP to fall back to (see [httplimit.WithFallbackKey]).
//
// # Several checks
//
// [httplimit.WithCheck] adds checks to one middleware — the user's policy and the
// IP's policy at once. A request passes only when every check allows it;
// the headers describe the binding check (the denying one, or the one with
// the least remaining).
//
// # Responses
//
// Allowed and denied responses carry X-RateLimit-Limit (the binding
// limit's requests per window), X-RateLimit-Remaining and
// X-RateLimit-Reset — by default the Unix time in seconds at which the
// quota is full again (the GitHub convention most clients parse);
// httplimit.WithResetDelta() writes delta seconds instead. A denial is
// 429 Too Many Requests with Retry-After in whole seconds — the core's exact
// retry-after rounded up, at least 1, so a client that waits that long is
// admitted — and an RFC 9457 problem+json body of the IETF quota-exceeded
// type. A request that can never be admitted (its cost exceeds the limit:
// core.Never) gets 429 without Retry-After. The draft-10 RateLimit and
// RateLimit-Policy fields are available with httplimit.WithHeaders(httplimit.HeaderDefault |
// HeaderIETF). Status, body and headers can each be replaced
// ([httplimit.WithDenyStatus], [httplimit.WithDenyBody], [httplimit.WithHeaders]), or the whole denial
// ([WithDenyHandler]). Shadow-mode and soft-limit overage requests pass
// (with Remaining 0 and no Retry-After).
//
// # Store failures
//
// A store error goes through the policy's FailMode: FailOpen passes the
// request (optionally marked by [httplimit.WithDegradedHeader]); FailClosed answers
// 503 with Retry-After: 1 and a generic body. The store's error text never
// reaches the client; [httplimit.WithErrorHook] receives it. [httplimit.WithSkip] exempts
// requests (health checks) before any key is computed.
//
// # Cost
//
// With the default key and a hot key, the middleware adds one allocation
// on net/http, gin and echo (the header values; echo's per-request
// middleware chain reuses the middleware's closure for a handler seen
// before) and none on fiber. A returning client's store key comes from a
// bounded cache keyed by the route, the method and the peer's address and
// port (one keep-alive connection): its second request makes the entry,
// later ones skip building the key.
// See the package benchmarks.
//
// # Framework internals
//
// The route is gin's public c.FullPath(). One thing has no public API: a
// route of r.Any shares one quota across its methods, and telling such a
// route apart needs the engine's routes (engine.Routes()), but
// gin.Context exports no way to its engine. The middleware reads
// gin.Context's unexported engine field, found by name and type through
// reflect once (a gin without it falls back to one quota per method,
// never to a wrong read). This is checked loudly: the package's tests fail
// when the field is missing or does not hold the serving engine, and when
// gin.Version differs from the version verified (engine_test.go says
// what to re-check before updating it). The read is engine.go's, the
// package's one file that imports unsafe; BenchmarkEngineOf measures it
// against reflect's safe read of the same field.
package ginlimit
