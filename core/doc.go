// Package core decides whether a request may proceed.
//
// Four types are all most applications use:
//
//   - [Limit]: a number of requests per window ([PerMinute](100),
//     [Per](900, 15*time.Minute)), with an optional burst.
//   - [Policy]: a named set of limits that must all hold, the [Algorithm]
//     that counts them, and what to do when the store fails ([FailMode]).
//   - [Limiter]: a policy on a [Store] (core/memstore in one process,
//     core/redisstore shared), built by [NewLimiter]; its Allow and AllowN
//     methods decide for a key.
//   - [Decision]: the answer — Allowed, Remaining, ResetAfter, RetryAfter —
//     from which the adapters write the response headers.
//
// Besides Allow, a Limiter has the quota verbs: [Limiter.PeekN] (what a
// request would get, consuming nothing), [Limiter.Reset] (forget a key),
// [Limiter.Charge] (consume after the fact, even past the limit),
// [Limiter.Refund] (give units back) and [Limiter.Wait] (block until
// admitted).
//
// For example:
//
//	store := memstore.MustNew()
//	limiter := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(100)}})
//	d, err := limiter.Allow(ctx, userID) // err: the store failed (the FailMode decided d)
//	if !d.Allowed { /* 429, retry after d.RetryAfter */ }
//
// core imports no third-party package and no HTTP framework. Adapters
// (nethttp, ginlimit, echolimit, fiberlimit, grpclimit) turn a request into a key and a
// [Decision] into a response; stores (core/memstore, core/redisstore) hold
// the per-key state.
//
// # Semantics
//
//   - A [Policy] holds one or more [Limit]s that must all hold
//     ("900 per 15m AND 200 per 1m"). A decision is all-or-nothing: when any
//     limit denies, none is consumed.
//   - A denied request consumes nothing, unless the policy sets CountDenied.
//   - [Decision.RetryAfter] is exact: the earliest moment the same request
//     would be allowed if nothing else is consumed, or [Never].
//   - Time is a parameter: [Compiled.Decide] takes now in microseconds; only
//     the [Limiter] reads a [Clock].
//   - A store failure is not a denial: the Limiter applies the policy's
//     [FailMode] within a per-call deadline and returns a [*StoreError].
//   - A configuration mistake fails at [NewLimiter], never as a store
//     error on the request path: on one store, policies of one name must
//     have the same limits ([SameState]) while their Limiters are live.
//   - Cost 0 is a peek: it consumes nothing and reports whether a request
//     of cost 1 would be allowed.
//   - Throttling is hard by default; SoftPercent tolerates a fixed
//     percentage over every limit; [Elastic] admits requests above the
//     limits, up to a ceiling, while a [CapacitySignal] says the service
//     has room, and is exactly hard otherwise.
//
// # Algorithms
//
// [GCRA] (the default) and [TokenBucket] smooth traffic to a rate with a
// burst; [FixedWindow] is the cheapest but admits up to twice the limit
// around a window boundary; [SlidingWindowLog] is exact over any window and
// keeps one timestamp per unit of the limit; [SlidingWindowCounter]
// approximates the sliding window with a few counters. The time resolution
// is one microsecond.
//
// # For store implementers
//
// A store implements [Store] (one atomic check-and-consume per Take) and
// applies the algorithms' math, which core exports for that purpose only:
// [Policy.Compile] turns a policy into a [Compiled] form whose
// [Compiled.Decide] (or [Compiled.DecideTo]) applies a request to a key's
// state of [Compiled.StateWords] int64 words and whose [Compiled.ExpiresAt]
// says when that state is back to a fresh key's; [EmissionInterval] and
// [MaxNow] are the constants a port to another runtime (the Redis store's
// Lua) must share. The optional interfaces a store may add (a store
// without I/O, the quota verbs, reservations, elastic policies, refunds,
// in-flight slots, policy-name registration) and the registry that keeps
// policy names are in package core/storekit; a Limiter finds them by type
// assertion. Each name here whose documentation starts with "For store
// implementers" is one applications do not need.
//
// Package core/storetest is the conformance suite every limitkit store
// passes; a store written elsewhere runs it with storetest.Run.
package core
