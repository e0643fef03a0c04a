package core

import (
	"math"
	"time"
)

// Never is the RetryAfter of a request that no amount of waiting would
// admit: its cost exceeds the binding limit's capacity.
const Never time.Duration = math.MaxInt64

// Decision is the outcome of one check-and-consume.
//
// The zero Decision denies with no limit attached; stores never return it
// except alongside an error.
//
// The flags follow the other fields so that they share one word: a
// Decision is returned by value on every path, and its size (80 bytes on
// 64-bit platforms) is part of what a decision costs.
type Decision struct {
	// Limit is the binding limit as configured (nominal, without soft
	// overage): when allowed, the one with the least room left; when
	// denied, the denying one with the longest wait. Zero when Degraded by
	// FailOpen or FailClosed; under FailLocal the local fallback's divided
	// limit.
	Limit Limit
	// Remaining is the cost the binding limit would still admit now, after
	// this request when it was allowed. Never negative; 0 when denied.
	// Under soft throttling it counts down to 0 at the nominal limit, while
	// the tolerated overage is still admitted.
	Remaining int64
	// ResetAfter is the time until the binding limit is back to full
	// (all its quota available again) if no more requests arrive. 0 when
	// the key holds no state. Never negative.
	ResetAfter time.Duration
	// RetryAfter is 0 when the request was allowed (and not Shadowed).
	// Otherwise it is the exact wait until the same request (same cost)
	// would be allowed if nothing else is consumed meanwhile — the maximum
	// over every limit that denied — rounded up to the microsecond; or
	// [Never] when the cost exceeds a limit's capacity.
	RetryAfter time.Duration
	// Policy is the name of the policy that decided.
	Policy string
	// Allowed reports whether the request may proceed. In shadow mode it is
	// always true (see Shadowed); under a store failure it follows the
	// policy's FailMode (see Degraded).
	Allowed bool
	// Shadowed is true when the policy is in shadow mode and would have
	// denied this request; Allowed is then true and RetryAfter says how long
	// the client would have had to wait.
	Shadowed bool
	// Degraded is true when the store failed or timed out and the policy's
	// FailMode made the decision (Allowed true for FailOpen, false for
	// FailClosed; under FailLocal the fleet tier's local store decided
	// with the policy's limits divided by the fleet size, and the other
	// fields are that store's). The accompanying error says why.
	Degraded bool
	// Elastic is true when the request was admitted above the policy's
	// limits by elastic throttling ([Policy.Elastic]): a limit had no room
	// left, the capacity signal had, and the elastic ceiling did. Limit is
	// then the nominal binding limit, Remaining is 0 and RetryAfter 0.
	Elastic bool
	// Cached is true when a store tier answered from its local deny cache
	// without calling the remote store (the fleet tier's cached denial,
	// exact until the denial's RetryAfter): the decision is a denial as
	// the remote store's was. Exporters count it as denied from the deny
	// cache.
	Cached bool
	// ElasticRoom is a store's hint to the [Limiter]: set on a denied
	// decision of an elastic policy when the policy's elastic ceiling would
	// admit the request, so that the Limiter asks the capacity signal (and
	// skips it otherwise). A Limiter clears it: callers of a Limiter never
	// see it set.
	ElasticRoom bool
}
