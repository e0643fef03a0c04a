package httplimit

import (
	"fmt"

	"github.com/limitkit/limitkit/core"
)

// Reason says why a request was denied; see [Rejection]. The zero value
// is not a reason (no denial).
type Reason uint8

// Reasons of a [Rejection].
const (
	// ReasonLimited: a check's quota is exhausted. Default status 429
	// ([WithDenyStatus] changes it), with Retry-After and the
	// quota-exceeded problem body ([WithDenyBody] changes it). A denial
	// by a FailLocal policy's local fallback store is ReasonLimited too:
	// the client is over its share of the limit.
	ReasonLimited Reason = iota + 1
	// ReasonUnavailable: the store of a FailClosed policy failed or timed
	// out. Status 503 with Retry-After: 1 and a generic problem body that
	// never carries the store's error text (that goes to the
	// [WithErrorHook] hook).
	ReasonUnavailable
	// ReasonNoKey: no key could be derived and [WithNoKeyDeny] (or a failed
	// fallback) denies. Not a quota denial: status 403 with a plain RFC 9457
	// problem ({"type":"about:blank","title":"Forbidden","status":403,...})
	// that names no policy, no X-RateLimit-* fields, no Retry-After;
	// nothing is counted. [WithDenyStatus] and [WithDenyBody] do not apply.
	ReasonNoKey
	// ReasonRefused: a check's key function returned a keyfuncs.Refusal:
	// the request carries the identity it keys by in a form it cannot read
	// the way the handler would (keyfuncs.FormField: a body over its
	// bound, another encoding, bad escaping, the field in the query
	// string, conflicting values). The request is refused whatever
	// [WithNoKeySkip] or [WithNoKeyDeny] say, never keyed by the fallback key: the refusal's
	// status (400 Bad Request, 413 Content Too Large or 415 Unsupported
	// Media Type) with a plain RFC 9457 problem carrying its detail
	// ({"type":"about:blank","title":"Bad Request","status":400,
	// "detail":"..."}), no X-RateLimit-* fields, no Retry-After; nothing
	// is counted. [WithDenyStatus] and [WithDenyBody] do not apply.
	ReasonRefused
)

// String returns "limited", "unavailable", "no_key" or "refused" (for logs and
// metrics labels), or "Reason(n)" for any other value.
func (r Reason) String() string {
	switch r {
	case ReasonLimited:
		return "limited"
	case ReasonUnavailable:
		return "unavailable"
	case ReasonNoKey:
		return "no_key"
	case ReasonRefused:
		return "refused"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Rejection describes a denial to an adapter's deny handler (see each
// adapter's WithDenyHandler): why, the binding decision, and the status,
// Retry-After and body the default denial would send, so that a handler
// can change only what it needs. The rate-limit headers (X-RateLimit-*,
// Retry-After, the IETF fields, as [WithHeaders] selects) are already set
// on the response when the handler runs. A Rejection carries no store
// error text: it is safe to show to the client.
type Rejection struct {
	// Reason says why: quota exhausted, store unavailable, or no key.
	Reason Reason
	// Decision is the binding decision: the denying check's. For
	// ReasonNoKey it carries only the policy name and RetryAfter
	// core.Never; for ReasonUnavailable it is Degraded, with no Limit.
	Decision core.Decision
	// Status is the status the default denial sends: the configured
	// denial status (429 unless [WithDenyStatus]) for ReasonLimited, 503
	// for ReasonUnavailable, 403 for ReasonNoKey, the refusal's (400, 413,
	// 415) for ReasonRefused.
	Status int
	// RetryAfter is the Retry-After value in whole seconds (the core's
	// exact RetryAfter rounded up, at least 1), or 0 when none applies:
	// ReasonNoKey, or a request that can never be admitted (core.Never:
	// its cost exceeds the limit).
	RetryAfter int64
	// ContentType and Body are the default denial body: the
	// [WithDenyBody] body or the RFC 9457 quota-exceeded problem
	// (application/problem+json) for
	// ReasonLimited, a plain problem naming no policy for the other
	// reasons. Body is shared between requests: do not modify it.
	ContentType string
	Body        []byte
}

// HeaderSet selects the header fields the middleware writes, for
// [WithHeaders]; combine the constants with |. The zero value is
// [HeaderNone].
type HeaderSet uint8

// Header sets for [WithHeaders].
const (
	// HeaderXRateLimit is X-RateLimit-Limit (the binding limit's Requests
	// per window), X-RateLimit-Remaining and X-RateLimit-Reset (see
	// [WithResetDelta]), on allowed and denied responses. On by default.
	HeaderXRateLimit HeaderSet = 1 << iota
	// HeaderRetryAfter is Retry-After on denials: integer delta seconds,
	// the core's exact RetryAfter rounded up, at least 1. Absent when the
	// request can never be admitted (core.Never: its cost exceeds the
	// limit). On by default.
	HeaderRetryAfter
	// HeaderIETF is the draft-ietf-httpapi-ratelimit-headers-10 pair:
	// RateLimit-Policy listing every limit of every check
	// (`"api";q=100;w=60`; a multi-limit policy's items are named
	// "api-15m", "api-1m") and RateLimit for the binding limit
	// (`"api";r=50;t=30`, t = seconds until the quota is full when
	// allowed, the Retry-After seconds when denied, absent for core.Never).
	// Off by default.
	HeaderIETF

	// HeaderNone writes no rate-limit header.
	HeaderNone HeaderSet = 0
	// HeaderDefault is what a middleware writes unless told otherwise:
	// HeaderXRateLimit | HeaderRetryAfter.
	HeaderDefault = HeaderXRateLimit | HeaderRetryAfter

	headerAll = HeaderXRateLimit | HeaderRetryAfter | HeaderIETF
)

// noKeyMode is what a middleware does when a check's key function finds
// no key: see [WithFallbackKey] (the default), [WithNoKeySkip] and
// [WithNoKeyDeny]. The zero value is noKeyFallback.
type noKeyMode uint8

const (
	noKeyFallback noKeyMode = iota
	noKeySkip
	noKeyDeny
)
