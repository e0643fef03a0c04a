// Package core decides whether a request may proceed: the limits, the
// policies that combine them, the algorithms' math, the Store interface that
// applies it atomically, and the Limiter that ties a store to a policy.
//
// core imports no third-party package and no HTTP framework. Adapters
// (nethttp, ginlimit, echolimit, fiberlimit) turn a request into a key and a
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
//   - Time is a parameter: [Policy.Decide] takes now in microseconds; only
//     the [Limiter] reads a [Clock].
//   - A store failure is not a denial: the Limiter applies the policy's
//     [FailMode] within a per-call deadline and returns a [*StoreError].
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
package core
