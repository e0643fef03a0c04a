// Package httplimit is limitkit's middleware: the options every adapter
// takes ([WithKey], [WithCheck], [WithHeaders], ...), the one configuration
// they build, and the framework-neutral [Engine] that applies it. The
// framework adapters — nethttp, ginlimit, echolimit, fiberlimit and
// grpclimit — are translations of their framework's request and response
// around an Engine, and nothing else; an adapter for another framework
// can be written outside this module with the same public API (see "Writing
// an adapter" below).
//
// Users mostly meet this package through an adapter. Every adapter takes
// this package's options, written the same way whatever the framework, so
// moving between frameworks changes only the constructor:
//
//	ginlimit.New(limiter, httplimit.WithKey(userKey), httplimit.WithNoKeySkip())
//	nethttp.New(limiter, httplimit.WithKey(userKey), httplimit.WithNoKeySkip())
//
// Code shared by several adapters (a function returning the options of a
// service) is written once against this package. The adapters export only
// their constructors, their deny-handler pieces and what is truly theirs
// (nethttp.WithRoute, an Identity accessor).
//
// # Keys and scopes
//
// Each check's store key is "<scope>|<client key>". The client key comes
// from [WithKey] or [WithIPKey] and defaults to keyfuncs.PeerIP(): the TCP
// peer address, IPv4 /32 and IPv6 /64, reading no header. The scope is,
// by default, the request method and the route pattern the framework
// matched ("GET /users/:id"), so every endpoint has its own quota per
// client, even under one global middleware, and "/users/1" and
// "/users/2" share one; a request that reaches no route (404, 405) gets
// the empty scope, shared by all such requests of a client. [WithScope]
// and [WithScopeFunc] replace it.
//
// # Limits chosen per request, counting by outcome
//
// [WithTiers] chooses the limiter of a request by its tier (a verified
// JWT claim "plan", a trusted header), with New's limiter as the default
// for a missing or unknown tier; [WithOverrides] gives individual client
// keys their own; every tier and override is its own policy, so counters
// never mix. [WithOutcome] counts only the responses whose status it
// accepts (failed logins), peeking before the handler and charging after
// it, and may reset a client's count on success. docs/policies.md has
// complete programs.
//
// # Options
//
// Options are applied in order; a later option overrides an earlier one
// of the same kind, except [WithCheck], which accumulates. A mistake (a
// nil function, a status outside 4xx/5xx, ...) makes the adapter's
// NewMiddleware return an error naming the option, and New panic with it
// (for start-up code). Options and the values of this package are
// immutable and safe to share between middlewares and goroutines.
//
// Every option is an [Option] (a function over the configuration) that any adapter
// accepts, except those an adapter cannot honour, which its constructor
// refuses with an error naming the option and what to do instead, rather
// than ignoring them:
//
//   - the few options that only mean something to one framework — a deny
//     handler takes that framework's request and response types — are
//     built with [AdapterOption], which tags them with their adapter's
//     name: nethttp.NewMiddleware(l, ginlimit.WithDenyHandler(h)) returns
//     "nethttp: ginlimit.WithDenyHandler is an option of package
//     ginlimit, given to a nethttp middleware: use
//     nethttp.WithDenyHandler" (grpclimit, which has none, says so and
//     how it denies instead); an adapter option with a name or a value
//     type its adapter does not declare is refused by that adapter too;
//   - [WithDenyStatus] and [WithDenyBody] shape an HTTP response, which
//     grpclimit does not write;
//   - [WithOutcome] needs an adapter that reports the response's outcome
//     ([Engine.Outcome]); every adapter of this module does.
//
// An adapter says what it honours with an [Adapter] description given to
// [NewAdapterEngine]. We chose construction errors over a distinct Option
// type per adapter: one Option type keeps options shareable between
// adapters (the common case), keeps call
// sites as they are, and the mistake still fails where it is written,
// before the first request.
//
// # Configuration exists once
//
// The configuration (config.go; unexported) is the only copy of a middleware's settings: options write its
// (unexported, validated) fields, [NewAdapterEngine] fills in the defaults that
// depend on the limiter (the clock, the fallback key) and keeps it in the
// [Engine], which reads it per request; what the Engine adds is only
// derived from it once (the checks, the limits' decimal forms, the
// RateLimit-Policy field, each policy's problem body). Adding an option
// is a field on config, a With function in options.go, and its use in
// the engine (engine.go builds it; decide.go, keys.go, scope.go and
// response.go run it); if some adapters cannot honour it, the option
// tags the config and adapter.go refuses it for them.
//
// # Writing an adapter
//
// An adapter describes itself once and builds one Engine per
// middleware, then, per request:
//
//	adapter := httplimit.Adapter{Name: "mylimit"}                  // what it honours (see below)
//	e, err := httplimit.NewAdapterEngine(adapter, limiter, opts...) // at construction
//
//	var res httplimit.Result                    // per request, on the stack
//	e.Decide(ctx, view, nil, &res)              // view: the httplimit.Request of the request
//	switch res.Action {
//	case httplimit.Skip:                        // exempt (WithSkip): no headers
//		next()
//	case httplimit.Pass:
//		e.SetHTTP(&res, header)                 // or e.Fields(&res, &f) for another header type
//		if id, ok := res.Identity(); ok {       // the WithKey key charged (WithIdentity), for the handler
//			ctx = httplimit.ContextWithIdentity(ctx, id)
//		}
//		next()
//	case httplimit.Deny:                        // quota, store, no key, or a refused key
//		e.SetHTTP(&res, header)
//		rej := e.Reject(&res)                   // status, Retry-After, content type and body
//		write(rej.Status, rej.ContentType, rej.Body)
//	}
//
// The view is the framework's request as a [Request]: method, route
// pattern (the framework's matched pattern, never the raw path), header,
// query, the TCP peer address as the server saw it, context values, and
// whether the matched route accepts every method (see below). A view that
// implements keyfuncs.HTTPRequester or keyfuncs.BodyRequester lets
// keyfuncs.FormField read the body; without either, a request with a
// body is refused by a form key (415), never keyed by another key. The
// [Adapter] description says what else the adapter honours, so that the
// engine refuses what it would ignore. An adapter with options of its
// own (a deny handler) defines them with [AdapterOption], declares them
// in [Adapter.Options] (name and value type) and reads them back with
// [AdapterOptionValue]. One that supports [WithOutcome] sets
// Adapter.Outcome, runs the handler of a passed request itself when
// [Engine.CountsOutcome] reports true and then calls [Engine.Outcome]
// with the response's status. One without HTTP responses (gRPC) sets
// Adapter.NoHTTPResponse, and writes the header fields elsewhere with
// [Engine.Fields] (names as [Fields.At] gives them). One
// that supports [WithInFlight] wraps each request in [Engine.InFlight]'s
// Enter and Exit. Everything else — keys, scopes, checks, fail modes,
// headers and bodies — is the engine's.
//
// A view may implement optional interfaces that make the engine faster
// without changing what it decides: [KeyParter] (the parts the key cache
// hashes, cheaper than Method, Route and RemoteAddr) and [PeerAddrer] (the
// peer as a netip.Addr). [Request.AnyMethod] is different: it is part of
// the contract, not an optimisation, since it changes the scope. A route
// that accepts every method (gin's r.Any; [AnyRoutes] indexes a router's
// registrations for it) is scoped by its route alone, one quota for all
// its methods; a view that answered false for it would scope such a route
// per method, one quota for each of the nine methods. The public
// conformance suite, package httplimit/adaptertest, fails an adapter that
// hands such a route one quota per method. Run it from a test of the adapter
// (adaptertest.Run(t, harness)). The adapters of this module use them; a test
// comparing a view with and without them (a [WithScopeFunc] that
// returns the default scope, [RouteScope] of the view's method and
// route, keys as the default without the key cache) keeps them honest. An adapter may
// also read its request's KeyParts itself, without an interface call,
// and pass them to [Engine.Decide] when [Engine.PartsKeyed] says
// the engine's keys are a function of them (the default key and scope):
// a returning client is then decided from the parts alone, and a view
// that costs something to build (echolimit's, pooled) is built only on a
// key-cache miss.
//
// The directory testdata/extadapter holds an adapter written as a module
// of its own, with only this public API; a test of this package builds
// and tests it against this checkout.
package httplimit
