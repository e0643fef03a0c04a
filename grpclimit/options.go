package grpclimit

import "github.com/limitkit/limitkit/httplimit"

// Option configures an [Interceptor]. It is [httplimit.Option]: the
// options of package httplimit apply to gRPC unchanged, with key
// functions seeing the call as a [Request] and "headers" meaning response
// metadata. The ones a gRPC server usually wants:
//
//   - httplimit.WithKey(keyfuncs.APIKey("x-api-key", "")): key by
//     metadata (default: the peer IP); httplimit.WithIPKey with
//     keyfuncs.XForwardedFor(trusted...) behind trusted proxies;
//   - httplimit.WithCheck: more limiters, each with its own key (a call
//     passes when every check allows it);
//   - httplimit.WithNoKey(httplimit.NoKeyFallback | NoKeySkip | NoKeyDeny):
//     the no-key mode (see [Interceptor] for the codes);
//   - httplimit.WithHeaders(httplimit.HeaderNone): no rate-limit metadata;
//     httplimit.WithResetFormat(httplimit.ResetDelta): seconds, not epoch,
//     in x-ratelimit-reset;
//   - [WithOutcome]: count only the calls that end with certain codes
//     (failed logins); httplimit.WithTiers, WithOverrides: a limiter per
//     plan, per named client;
//   - httplimit.WithScope, WithScopeFunc, WithSkip, WithCost,
//     WithErrorHook, WithClock, WithInFlight.
//
// Header options name metadata keys, lowercased: HeaderIETF adds
// ratelimit-policy and ratelimit, WithDegradedHeader(name) marks a call
// admitted because the store failed. WithDenyStatus and WithDenyBody
// shape HTTP responses: New refuses them with an error naming them.
type Option = httplimit.Option

// Rejection describes a denial ([httplimit.Rejection]). Its Reason picks
// the status code: httplimit.ReasonLimited is codes.ResourceExhausted,
// ReasonUnavailable (a FailClosed store failed) codes.Unavailable, and
// ReasonNoKey codes.Unauthenticated.
type Rejection = httplimit.Rejection
