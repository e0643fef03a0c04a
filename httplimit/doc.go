// Package httplimit is the vocabulary every limitkit HTTP middleware
// shares: the options ([WithKey], [WithCheck], [WithHeaders], ...), the
// description of a denial ([Rejection], [Reason]) and the enumerations the
// options take ([HeaderSet], [ResetFormat], [NoKeyMode]).
//
// The framework adapters — nethttp, ginlimit, echolimit and fiberlimit —
// re-export every name of this package under the same name (type aliases,
// constants and one-line forwarding functions), so that call sites read
// naturally and moving between frameworks is a search-and-replace of the
// package name:
//
//	ginlimit.New(limiter, ginlimit.WithKey(userKey), ginlimit.WithNoKey(ginlimit.NoKeySkip))
//	nethttp.New(limiter, nethttp.WithKey(userKey), nethttp.WithNoKey(nethttp.NoKeySkip))
//
// Each adapter adds only what is framework-specific: New and NewMiddleware,
// its DenyHandler type and WithDenyHandler, and WriteRejection. The two
// spellings are interchangeable — ginlimit.WithKey(f) and
// httplimit.WithKey(f) are the same Option, and a ginlimit.Rejection is an
// httplimit.Rejection — so code shared by several adapters (a function
// returning the options of a service) can be written once against this
// package. This package is where `go doc` shows the fields and constants;
// the adapters' aliases point here.
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
package httplimit
