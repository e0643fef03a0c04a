// Code shared verbatim by nethttp, ginlimit, echolimit and fiberlimit
// (only the package clause differs): the options and types of package
// httplimit under the same names in every adapter, so moving between
// frameworks is a search-and-replace of the package name. Their full
// documentation — every field and constant — is httplimit's:
// go doc github.com/limitkit/limitkit/httplimit.

package fiberlimit

import (
	"context"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Option configures the middleware built by [New] or [NewMiddleware]:
// an [httplimit.Option], so options of any adapter and of package
// httplimit mix freely. Options are applied in order; a later option
// overrides an earlier one of the same kind (except [WithCheck], which
// accumulates).
type Option = httplimit.Option

// Rejection describes a denial to a [DenyHandler]; it is
// [httplimit.Rejection], with the fields Reason (why), Decision (the
// binding check's), Status, RetryAfter (seconds, 0 when none applies),
// ContentType and Body (what the default denial sends). The rate-limit
// headers are already set on the response when the handler runs.
type Rejection = httplimit.Rejection

// Reason says why a request was denied: [ReasonLimited],
// [ReasonUnavailable] or [ReasonNoKey]. It is [httplimit.Reason].
type Reason = httplimit.Reason

// Reasons of a [Rejection] (see [httplimit.ReasonLimited] and the
// following constants for the full contract).
const (
	// ReasonLimited: a check's quota is exhausted. Default status 429.
	ReasonLimited = httplimit.ReasonLimited
	// ReasonUnavailable: the store of a FailClosed policy failed or timed
	// out. Status 503 with Retry-After: 1; the body never carries the
	// store's error text.
	ReasonUnavailable = httplimit.ReasonUnavailable
	// ReasonNoKey: no key could be derived and [NoKeyDeny] (or a failed
	// fallback) denies: 403, no rate-limit fields, nothing counted.
	ReasonNoKey = httplimit.ReasonNoKey
)

// HeaderSet selects the header fields the middleware writes; combine with
// |. It is [httplimit.HeaderSet].
type HeaderSet = httplimit.HeaderSet

// Header sets for [WithHeaders] (see [httplimit.HeaderXRateLimit] and the
// following constants for the exact fields).
const (
	// HeaderXRateLimit: X-RateLimit-Limit, -Remaining and -Reset. On by
	// default.
	HeaderXRateLimit = httplimit.HeaderXRateLimit
	// HeaderRetryAfter: Retry-After on denials. On by default.
	HeaderRetryAfter = httplimit.HeaderRetryAfter
	// HeaderIETF: RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers-10). Off by default.
	HeaderIETF = httplimit.HeaderIETF
	// HeaderNone writes no rate-limit header.
	HeaderNone = httplimit.HeaderNone
	// HeaderDefault is HeaderXRateLimit | HeaderRetryAfter.
	HeaderDefault = httplimit.HeaderDefault
)

// ResetFormat says how X-RateLimit-Reset is written; see
// [WithResetFormat]. It is [httplimit.ResetFormat].
type ResetFormat = httplimit.ResetFormat

// Reset formats.
const (
	// ResetEpoch: Unix seconds at which the quota is full again. The
	// default.
	ResetEpoch = httplimit.ResetEpoch
	// ResetDelta: seconds until then; immune to clock skew.
	ResetDelta = httplimit.ResetDelta
)

// NoKeyMode says what happens when a key function finds no key; see
// [WithNoKey]. It is [httplimit.NoKeyMode].
type NoKeyMode = httplimit.NoKeyMode

// No-key modes for [WithNoKey] (see [httplimit.NoKeyFallback] and the
// following constants for the full contract).
const (
	// NoKeyFallback keys the check by the fallback key (the peer IP),
	// under a distinct "~fb/" prefix; denies with 403 if that finds none
	// either. The default.
	NoKeyFallback = httplimit.NoKeyFallback
	// NoKeySkip skips the check for that request; other checks still
	// apply.
	NoKeySkip = httplimit.NoKeySkip
	// NoKeyDeny denies the request: 403, no rate-limit fields.
	NoKeyDeny = httplimit.NoKeyDeny
)

// WithKey sets the key function of the limiter passed to New (default:
// the TCP peer IP, reading no header); see [httplimit.WithKey].
func WithKey(f keyfuncs.Func) Option { return httplimit.WithKey(f) }

// WithIPKey keys the limiter passed to New by an IP resolver such as
// keyfuncs.XForwardedFor(trustedCIDRs...); see [httplimit.WithIPKey].
func WithIPKey(r *keyfuncs.Resolver) Option { return httplimit.WithIPKey(r) }

// WithCheck adds a check: l applied to the key that key returns (nil: the
// peer IP); a request passes only when every check allows it. See
// [httplimit.WithCheck].
func WithCheck(l *core.Limiter, key keyfuncs.Func) Option { return httplimit.WithCheck(l, key) }

// WithScope replaces the default key namespace ("<METHOD> <route
// pattern>") with a fixed one; see [httplimit.WithScope].
func WithScope(scope string) Option { return httplimit.WithScope(scope) }

// WithScopeFunc computes the key namespace per request (bounded
// cardinality: never the raw path); see [httplimit.WithScopeFunc].
func WithScopeFunc(f func(r keyfuncs.Request) string) Option { return httplimit.WithScopeFunc(f) }

// WithSkip exempts requests for which f returns true: not counted, no
// headers. See [httplimit.WithSkip].
func WithSkip(f func(r keyfuncs.Request) bool) Option { return httplimit.WithSkip(f) }

// WithCost charges f(r) units per request instead of 1; see
// [httplimit.WithCost].
func WithCost(f func(r keyfuncs.Request) int64) Option { return httplimit.WithCost(f) }

// WithNoKey sets what happens when a check's key function finds no key
// ([NoKeyFallback] by default); see [httplimit.WithNoKey].
func WithNoKey(m NoKeyMode) Option { return httplimit.WithNoKey(m) }

// WithFallbackKey selects [NoKeyFallback] with f as the fallback key
// function; see [httplimit.WithFallbackKey].
func WithFallbackKey(f keyfuncs.Func) Option { return httplimit.WithFallbackKey(f) }

// WithHeaders selects the header fields written (default
// [HeaderDefault]); see [httplimit.WithHeaders].
func WithHeaders(h HeaderSet) Option { return httplimit.WithHeaders(h) }

// WithResetFormat chooses epoch ([ResetEpoch], the default) or delta
// ([ResetDelta]) seconds for X-RateLimit-Reset; see
// [httplimit.WithResetFormat].
func WithResetFormat(f ResetFormat) Option { return httplimit.WithResetFormat(f) }

// WithDegradedHeader sets the named header to "1" on requests admitted
// only because a FailOpen store failed; see [httplimit.WithDegradedHeader].
func WithDegradedHeader(name string) Option { return httplimit.WithDegradedHeader(name) }

// WithDenyStatus sets the status of quota denials (default 429); see
// [httplimit.WithDenyStatus].
func WithDenyStatus(code int) Option { return httplimit.WithDenyStatus(code) }

// WithDenyBody replaces the default body of quota denials (body is
// copied); see [httplimit.WithDenyBody].
func WithDenyBody(contentType string, body []byte) Option {
	return httplimit.WithDenyBody(contentType, body)
}

// WithErrorHook reports errors the client never sees (store failures,
// invalid key material); f runs on the request path. See
// [httplimit.WithErrorHook].
func WithErrorHook(f func(ctx context.Context, err error)) Option {
	return httplimit.WithErrorHook(f)
}

// WithClock sets the clock of epoch X-RateLimit-Reset values (default:
// the limiter's); see [httplimit.WithClock].
func WithClock(c core.Clock) Option { return httplimit.WithClock(c) }

// WithInFlight counts the requests the middleware handles in f, from
// before the decision until the rest of the chain returns: the load that
// core.LoadBelow (elastic throttling's in-process signal) reads. See
// [httplimit.WithInFlight].
func WithInFlight(f *core.InFlight) Option { return httplimit.WithInFlight(f) }
