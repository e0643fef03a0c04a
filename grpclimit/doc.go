// Package grpclimit is limitkit's gRPC adapter: unary and stream server
// interceptors built on the same engine, key functions and limiters as
// the HTTP adapters.
//
//	ic, err := grpclimit.New(limiter, httplimit.WithKey(apiKey)) // apiKey: keyfuncs.APIKey("x-api-key", "")
//	srv := grpc.NewServer(
//		grpc.UnaryInterceptor(ic.UnaryServerInterceptor()),
//		grpc.StreamInterceptor(ic.StreamServerInterceptor()),
//	)
//
// # Keys and scope
//
// Key functions see a call as a [NewRequest]: metadata through Header (so
// keyfuncs.APIKey, keyfuncs.Header and keyfuncs.JWTClaim read metadata
// keys), the transport peer through RemoteAddr (keyfuncs.PeerIP, the
// default key, strips the port and groups IPv6 by /64), x-forwarded-for
// only through a resolver given trusted proxies (keyfuncs.XForwardedFor),
// and the context's values for an identity an authentication interceptor
// verified. The scope of every key is the full method name
// ("/pkg.Service/Method"): each method has its own quota per client, a
// unary and a stream method alike. [httplimit.WithScope] and [httplimit.WithScopeFunc]
// change that. Behind grpc.UnknownServiceHandler (a proxy) the client
// names the method: every method the server did not register shares one
// scope, "(unregistered)", so that invented names never give a client
// fresh quota. The health service's and server reflection's methods are
// never limited when the server registered them, matched exactly
// (Health's Check, Watch and List; ServerReflectionInfo of reflection's
// v1 and v1alpha); any other name under those services is limited.
//
// A stream is admitted, and charged once, when it opens. The messages on
// an admitted stream are not limited unless the stream interceptor is
// given [PerMessage]: each received message is then charged to a policy
// of its own, and a denied message ends the stream with
// codes.ResourceExhausted and the details below.
//
// # Answers
//
// An admitted call carries, as response header metadata, x-ratelimit-limit,
// x-ratelimit-remaining and x-ratelimit-reset (the metadata keys are these strings;
// [httplimit.WithHeaders](httplimit.HeaderNone) turns them off). The
// map given to the stream's SetHeader is shared between calls with the
// same three values and must not be modified (as the maps of
// metadata.FromIncomingContext must not): grpc-go's transport copies it,
// and a stream of one's own (a test's, a wrapper's) may keep it but must
// not write into it. A denied
// call never reaches the handler and ends with a trailers-only response
// (its metadata, the same keys plus retry-after, is in the trailers:
// grpc-go retries only a call whose server sent no headers) and:
//
//   - quota exhausted: codes.ResourceExhausted, with the status details
//     google.rpc.RetryInfo (RetryDelay is the limiter's RetryAfter
//     exactly), google.rpc.QuotaFailure (subject "policy:<name>") and
//     google.rpc.ErrorInfo (reason RATE_LIMIT_EXCEEDED, domain limitkit,
//     metadata policy, limit, window); the trailer grpc-retry-pushback-ms
//     (RetryAfter in milliseconds, rounded up), which grpc-go clients with
//     a retry policy on RESOURCE_EXHAUSTED obey; and retry-after (whole
//     seconds). When the call's cost exceeds the
//     limit no wait helps: no RetryInfo, and pushback -1 (do not retry).
//   - store failure: the limiter's fail mode decides. FailOpen admits,
//     FailLocal decides on the in-process fallback store; FailClosed
//     answers codes.Unavailable with RetryInfo 1 s and pushback 1000. The
//     store's error text never reaches the client ([httplimit.WithErrorHook] sees
//     it).
//   - no key: as over HTTP, [httplimit.WithFallbackKey] (the default) limits the call
//     by the peer IP under a prefix of its own; [httplimit.WithNoKeySkip] lets it
//     through unlimited; [httplimit.WithNoKeyDeny], or a fallback that finds no peer IP
//     (a Unix-socket listener), answers codes.Unauthenticated and counts
//     nothing.
//
// # Counting by outcome
//
// [WithOutcome] counts only the calls that end with a status code its
// Count accepts, for login throttling (count Unauthenticated, not OK):
//
//	grpclimit.New(limiter, httplimit.WithKey(user),
//		grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated), ResetOnSuccess: true}))
//
// A client already over its limit is denied before the handler, with
// codes.ResourceExhausted and the details above; the others run, and the
// code the handler returns (status.FromError; nil is OK, a context error
// Canceled or DeadlineExceeded, another error Unknown: what the client
// sees) decides after it: a counting code is charged, another is not, and
// with ResetOnSuccess an OK call clears the client's count. ChargeFirst
// takes the quota before the handler and refunds it when the code does not
// count, exact under concurrency. A stream is settled by its handler's
// code when it ends. [httplimit.WithOutcome] (what a rules file's count:
// builds) works too, its Count seeing the code's HTTP status
// (google.rpc's mapping, grpc-gateway's: Unauthenticated is 401; the
// table is in docs/grpc.md). [httplimit.WithTiers] and
// [httplimit.WithOverrides] choose the limiter per call as over HTTP.
//
// # Options
//
// [New] takes [httplimit.Option] values: the options of package httplimit
// apply to gRPC unchanged, with key functions seeing the call as
// [NewRequest] describes (metadata for headers, the peer for the remote
// address) and "headers" meaning response metadata. Header options name
// metadata keys (lowercased): HeaderIETF adds ratelimit-policy and
// ratelimit; WithDegradedHeader("X-RateLimit-Degraded") marks a call
// admitted because the store failed with x-ratelimit-degraded: 1.
// WithDenyStatus and WithDenyBody, which shape an HTTP response, and the
// HTTP adapters' own options (WithDenyHandler, nethttp.WithRoute) make
// [New] return an error naming them.
//
// # Clients
//
// grpc-go clients with a retry policy on RESOURCE_EXHAUSTED obey the
// pushback by themselves. For callers without one, [UnaryClientInterceptor]
// and [StreamClientInterceptor] wait the delay a denial asks for
// ([RetryDelay]) and retry, within [ClientConfig]'s MaxAttempts and MaxWait and the
// call's deadline.
//
// Interceptors are safe for concurrent use and never panic on a call.

package grpclimit
