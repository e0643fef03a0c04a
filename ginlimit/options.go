// Code shared verbatim by nethttp, ginlimit, echolimit and fiberlimit
// (only the package clause differs): the same options under the same names,
// so moving between frameworks is a search-and-replace of the package name.

package ginlimit

import (
	"context"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/limitmw"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Option configures the middleware built by [New] or [NewMiddleware].
// Options are applied in order; a later option overrides an earlier one of
// the same kind (except [WithCheck], which accumulates).
type Option = limitmw.Option

// Rejection describes a denial to a [DenyHandler]: why (Reason), the
// binding decision, the status and body the default denial would send, and
// the Retry-After seconds (0 when none applies). The rate-limit headers are
// already set on the response when the handler runs.
type Rejection = limitmw.Rejection

// Reason says why a request was denied; see [Rejection].
type Reason = limitmw.Reason

// Reasons of a [Rejection].
const (
	// ReasonLimited: a check's quota is exhausted. Default status 429.
	ReasonLimited = limitmw.ReasonLimited
	// ReasonUnavailable: the store of a FailClosed policy failed or timed
	// out. Status 503 with Retry-After: 1; the body never carries the
	// store's error text (that goes to the [WithErrorHook] hook).
	ReasonUnavailable = limitmw.ReasonUnavailable
	// ReasonNoKey: no key could be derived and [NoKeyDeny] (or a failed
	// fallback) denies. Not a quota denial: status 403 with a plain RFC 9457
	// problem ({"type":"about:blank","title":"Forbidden","status":403,...})
	// that names no policy, no X-RateLimit-* fields, no Retry-After; nothing
	// is counted. [WithDenyStatus] and [WithDenyBody] do not apply.
	ReasonNoKey = limitmw.ReasonNoKey
)

// HeaderSet selects the header fields the middleware writes; combine with |.
type HeaderSet = limitmw.HeaderSet

// Header sets for [WithHeaders].
const (
	// HeaderXRateLimit is X-RateLimit-Limit (the binding limit's Requests
	// per window), X-RateLimit-Remaining and X-RateLimit-Reset (see
	// [WithResetFormat]), on allowed and denied responses. On by default.
	HeaderXRateLimit = limitmw.HeaderXRateLimit
	// HeaderRetryAfter is Retry-After on denials: integer delta seconds,
	// the core's exact RetryAfter rounded up, at least 1. Absent when the
	// request can never be admitted (core.Never: its cost exceeds the
	// limit). On by default.
	HeaderRetryAfter = limitmw.HeaderRetryAfter
	// HeaderIETF is the draft-ietf-httpapi-ratelimit-headers-10 pair:
	// RateLimit-Policy listing every limit of every check
	// (`"api";q=100;w=60`; a multi-limit policy's items are named
	// "api-15m", "api-1m") and RateLimit for the binding limit
	// (`"api";r=50;t=30`, t = seconds until the quota is full when
	// allowed, the Retry-After seconds when denied, absent for core.Never).
	// Off by default.
	HeaderIETF = limitmw.HeaderIETF
	// HeaderNone writes no rate-limit header.
	HeaderNone = limitmw.HeaderNone
	// HeaderDefault is HeaderXRateLimit | HeaderRetryAfter.
	HeaderDefault = limitmw.HeaderDefault
)

// ResetFormat says how X-RateLimit-Reset is written; see [WithResetFormat].
type ResetFormat = limitmw.ResetFormat

// Reset formats.
const (
	// ResetEpoch: Unix seconds (rounded up) at which the binding limit's
	// quota is full again — the GitHub/GitLab/Twitter convention that most
	// X-RateLimit-* clients parse. The default. Relies on the client's
	// clock agreeing with the server's.
	ResetEpoch = limitmw.ResetEpoch
	// ResetDelta: seconds (rounded up) until then, like Retry-After and
	// the IETF t parameter; immune to clock skew.
	ResetDelta = limitmw.ResetDelta
)

// NoKeyMode says what happens when a key function finds no key
// (keyfuncs.ErrNoKey) or invalid key material (any other error, which is
// also reported to the [WithErrorHook] hook).
type NoKeyMode = limitmw.NoKeyMode

// No-key modes for [WithNoKey].
const (
	// NoKeyFallback keys the check by the fallback key function (the peer
	// IP unless [WithFallbackKey] says otherwise), prefixed "~fb/" so that
	// it never shares quota with a primary key that looks the same; if the
	// fallback finds no key either, the request is denied (ReasonNoKey,
	// 403) and the [WithErrorHook] hook is told. The default: a request is
	// never let through unlimited by accident.
	//
	// With the default key (the peer IP) a primary key always exists unless
	// the peer address is not an IP: a server listening on a Unix socket
	// (behind a local proxy) denies every request with 403. There, key by
	// what the proxy passes on — e.g. [WithKey] with keyfuncs.Header on a
	// header the proxy overwrites on every request, safe only when nothing
	// but the proxy can reach the socket — or choose [NoKeySkip] to leave
	// such requests unlimited.
	NoKeyFallback = limitmw.NoKeyFallback
	// NoKeySkip skips the check for that request; other checks still
	// apply. Use it for the user check of a user+IP hybrid, so anonymous
	// requests are limited by the IP check alone.
	NoKeySkip = limitmw.NoKeySkip
	// NoKeyDeny denies the request (ReasonNoKey: 403, no rate-limit
	// fields, no Retry-After).
	NoKeyDeny = limitmw.NoKeyDeny
)

// WithKey sets the key function of the limiter passed to New. Without it
// (and without [WithIPKey]) requests are keyed by keyfuncs.PeerIP(): the
// TCP peer address, IPv4 /32 and IPv6 /64, reading no header — never the
// framework's client-IP helper, which trusts spoofable headers. Behind a
// proxy, pass a trusted-proxy resolver (keyfuncs.XForwardedFor(cidrs...))
// to [WithIPKey], or its Key method here.
func WithKey(f keyfuncs.Func) Option { return limitmw.WithKey(f) }

// WithIPKey keys the limiter passed to New by an IP resolver
// (keyfuncs.PeerIP(), keyfuncs.XForwardedFor(...), ...). It is equivalent to
// WithKey(r.Key) but renders the address without allocating.
func WithIPKey(r *keyfuncs.Resolver) Option { return limitmw.WithIPKey(r) }

// WithCheck adds a check to the middleware: l applied to the key that key
// returns (nil key: the peer IP). A request is admitted only when every
// check admits it (core.AllowAll: checks run in order, New's limiter first,
// and stop at the first denial, so later checks consume nothing); the
// headers describe the binding check. This is the hybrid "limit the user
// and the IP": New(userLimiter, WithKey(userKey), WithNoKey(NoKeySkip),
// WithCheck(ipLimiter, nil)). At most 8 checks.
func WithCheck(l *core.Limiter, key keyfuncs.Func) Option { return limitmw.WithCheck(l, key) }

// WithScope replaces the default key namespace with a fixed one. By
// default every store key is "<METHOD> <route pattern>|<client key>" (e.g.
// "GET /users/:id|203.0.113.7"; net/http patterns that name their method
// are used as is), so that each endpoint has its own quota per client even
// under one global middleware, and "/users/1" and "/users/2" share one.
// WithScope("") makes every route the middleware covers share one quota
// per client; WithScope("uploads") on several routes makes them share a
// named quota. Stores further separate keys by policy.
func WithScope(scope string) Option { return limitmw.WithScope(scope) }

// WithScopeFunc computes the key namespace per request, e.g. from a
// router the adapter does not know (chi: read chi.RouteContext via
// r.Value(chi.RouteCtxKey) in a per-route middleware). The result must have
// bounded cardinality: never return the raw path.
func WithScopeFunc(f func(r keyfuncs.Request) string) Option { return limitmw.WithScopeFunc(f) }

// WithSkip exempts requests for which f returns true (health checks,
// internal callers): they are not counted and get no rate-limit headers.
// f must be fast and must not retain r.
func WithSkip(f func(r keyfuncs.Request) bool) Option { return limitmw.WithSkip(f) }

// WithCost charges f(r) units per request instead of 1 (weighted
// requests); values below 1 count as 1 (use [WithSkip] to exempt).
func WithCost(f func(r keyfuncs.Request) int64) Option { return limitmw.WithCost(f) }

// WithNoKey sets what happens when a check's key function finds no key
// ([NoKeyFallback] by default).
func WithNoKey(m NoKeyMode) Option { return limitmw.WithNoKey(m) }

// WithFallbackKey selects [NoKeyFallback] with f as the fallback key
// function (default keyfuncs.PeerIP().Key).
func WithFallbackKey(f keyfuncs.Func) Option { return limitmw.WithFallbackKey(f) }

// WithHeaders selects the header fields written (default
// [HeaderDefault]); [HeaderNone] turns them all off.
func WithHeaders(h HeaderSet) Option { return limitmw.WithHeaders(h) }

// WithResetFormat chooses epoch seconds ([ResetEpoch], the default) or
// delta seconds ([ResetDelta]) for X-RateLimit-Reset.
func WithResetFormat(f ResetFormat) Option { return limitmw.WithResetFormat(f) }

// WithDegradedHeader sets the named header to "1" on requests admitted
// only because a FailOpen policy's store failed (none by default).
func WithDegradedHeader(name string) Option { return limitmw.WithDegradedHeader(name) }

// WithDenyStatus sets the status of quota denials (default 429 Too Many
// Requests). Store failures under FailClosed always answer 503, and no-key
// denials ([ReasonNoKey]) 403.
func WithDenyStatus(code int) Option { return limitmw.WithDenyStatus(code) }

// WithDenyBody replaces the default denial body — an RFC 9457
// application/problem+json object of the IETF draft's quota-exceeded type:
// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
// "title":"Request cannot be satisfied as assigned quota has been exceeded",
// "status":429,"violated-policies":["api"]} — for quota denials. No-key
// and store-failure denials keep their own bodies. body is copied.
func WithDenyBody(contentType string, body []byte) Option {
	return limitmw.WithDenyBody(contentType, body)
}

// WithErrorHook reports errors the client never sees: store failures
// (*core.StoreError, whatever the fail mode), invalid key material from
// a key function, and requests denied because not even the fallback key
// exists (wrapping keyfuncs.ErrNoKey: a server on a Unix socket). ctx is the request's context. f runs on the request path:
// keep it fast (log, count).
func WithErrorHook(f func(ctx context.Context, err error)) Option { return limitmw.WithErrorHook(f) }

// WithClock sets the clock from which epoch X-RateLimit-Reset values are
// computed. Default: the limiter's own clock, read once per request for both
// the decision and the header.
func WithClock(c core.Clock) Option { return limitmw.WithClock(c) }
