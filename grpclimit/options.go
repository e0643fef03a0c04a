package grpclimit

import (
	"context"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Option configures an [Interceptor]: an [httplimit.Option], so the
// options of package httplimit and of every HTTP adapter apply to gRPC
// unchanged (key functions see the call as a [Request]). Options are
// applied in order; a later option overrides an earlier one of the same
// kind (except [WithCheck], which accumulates). Full documentation of
// each is httplimit's.
type Option = httplimit.Option

// Rejection describes a denial ([httplimit.Rejection]); its Reason picks
// the status code (see [Interceptor]).
type Rejection = httplimit.Rejection

// Reasons of a denial and the gRPC code each is answered with.
const (
	// ReasonLimited: a quota is exhausted. codes.ResourceExhausted.
	ReasonLimited = httplimit.ReasonLimited
	// ReasonUnavailable: the store of a FailClosed policy failed.
	// codes.Unavailable, RetryInfo 1 s. (FailOpen and FailLocal policies
	// admit or decide locally; the call never sees the failure.)
	ReasonUnavailable = httplimit.ReasonUnavailable
	// ReasonNoKey: no key and [NoKeyDeny] (or a fallback that found none
	// either). codes.Unauthenticated; nothing is counted.
	ReasonNoKey = httplimit.ReasonNoKey
)

// HeaderSet selects the metadata written; see [WithHeaders].
type HeaderSet = httplimit.HeaderSet

// Metadata sets for [WithHeaders].
const (
	// HeaderXRateLimit: x-ratelimit-limit, -remaining and -reset. On by
	// default.
	HeaderXRateLimit = httplimit.HeaderXRateLimit
	// HeaderRetryAfter: retry-after (whole seconds) on denials. On by
	// default.
	HeaderRetryAfter = httplimit.HeaderRetryAfter
	// HeaderNone writes no rate-limit metadata (the pushback trailer and
	// the status details of a denial are always sent).
	HeaderNone = httplimit.HeaderNone
	// HeaderDefault is HeaderXRateLimit | HeaderRetryAfter.
	HeaderDefault = httplimit.HeaderDefault
)

// ResetFormat says how x-ratelimit-reset is written.
type ResetFormat = httplimit.ResetFormat

// Reset formats for [WithResetFormat].
const (
	// ResetEpoch: Unix seconds at which the quota is full again (default).
	ResetEpoch = httplimit.ResetEpoch
	// ResetDelta: seconds until then.
	ResetDelta = httplimit.ResetDelta
)

// NoKeyMode says what happens when a key function finds no key.
type NoKeyMode = httplimit.NoKeyMode

// No-key modes for [WithNoKey], as over HTTP.
const (
	// NoKeyFallback keys the call by the fallback key (the peer IP, under
	// a distinct prefix); codes.Unauthenticated if that finds none either
	// (a Unix-socket listener). The default.
	NoKeyFallback = httplimit.NoKeyFallback
	// NoKeySkip skips the check for that call.
	NoKeySkip = httplimit.NoKeySkip
	// NoKeyDeny answers codes.Unauthenticated, counting nothing.
	NoKeyDeny = httplimit.NoKeyDeny
)

// WithKey sets the key function of the limiter passed to New (default:
// the peer IP), for example keyfuncs.APIKey("x-api-key") to key by
// metadata. See [httplimit.WithKey].
func WithKey(f keyfuncs.Func) Option { return httplimit.WithKey(f) }

// WithIPKey keys the limiter passed to New by an IP resolver such as
// keyfuncs.XForwardedFor(trustedCIDRs...), which reads x-forwarded-for
// metadata only from the trusted proxies. See [httplimit.WithIPKey].
func WithIPKey(r *keyfuncs.Resolver) Option { return httplimit.WithIPKey(r) }

// WithCheck adds a check: l applied to the key that key returns (nil: the
// peer IP); a call passes only when every check allows it.
func WithCheck(l *core.Limiter, key keyfuncs.Func) Option { return httplimit.WithCheck(l, key) }

// WithScope replaces the default key namespace (the full method name)
// with a fixed one: every method then shares one quota per client.
func WithScope(scope string) Option { return httplimit.WithScope(scope) }

// WithScopeFunc computes the key namespace per call (bounded
// cardinality), for example the service name for one quota per service.
func WithScopeFunc(f func(r keyfuncs.Request) string) Option { return httplimit.WithScopeFunc(f) }

// WithSkip exempts the calls for which f returns true, besides the
// health and reflection services (always exempt, see [Exempt]).
func WithSkip(f func(r keyfuncs.Request) bool) Option { return httplimit.WithSkip(f) }

// WithCost charges f(r) units per call instead of 1.
func WithCost(f func(r keyfuncs.Request) int64) Option { return httplimit.WithCost(f) }

// WithNoKey sets what happens when a check's key function finds no key
// ([NoKeyFallback] by default).
func WithNoKey(m NoKeyMode) Option { return httplimit.WithNoKey(m) }

// WithFallbackKey selects [NoKeyFallback] with f as the fallback key.
func WithFallbackKey(f keyfuncs.Func) Option { return httplimit.WithFallbackKey(f) }

// WithHeaders selects the metadata written (default [HeaderDefault]);
// WithHeaders(HeaderNone) writes none.
func WithHeaders(h HeaderSet) Option { return httplimit.WithHeaders(h) }

// WithResetFormat chooses epoch ([ResetEpoch]) or delta ([ResetDelta])
// seconds for x-ratelimit-reset.
func WithResetFormat(f ResetFormat) Option { return httplimit.WithResetFormat(f) }

// WithErrorHook reports errors the client never sees (store failures,
// invalid key material); f runs on the call path.
func WithErrorHook(f func(ctx context.Context, err error)) Option {
	return httplimit.WithErrorHook(f)
}

// WithClock sets the clock of epoch x-ratelimit-reset values (default:
// the limiter's).
func WithClock(c core.Clock) Option { return httplimit.WithClock(c) }

// WithInFlight counts the calls the interceptors handle in f, from
// before the decision until the handler returns (for a stream: until it
// closes); see [httplimit.WithInFlight].
func WithInFlight(f *core.InFlight) Option { return httplimit.WithInFlight(f) }
