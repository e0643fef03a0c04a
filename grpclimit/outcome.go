package grpclimit

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/limitkit/limitkit/httplimit"
)

// WithOutcome counts only the calls whose gRPC status code o.Count
// accepts, as login throttling needs (count Unauthenticated, not OK). It
// takes [httplimit.Outcome], the one Outcome type of HTTP and gRPC; its
// Count sees the call's code as a number: 200 for codes.OK, 1000 + the
// code for any other (1016: Unauthenticated). Build it with [CodeIn] or
// [CodeNotOK]:
//
//	grpclimit.New(limiter, httplimit.WithKey(user),
//		grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated), ResetOnSuccess: true}))
//
// A client already over its limit is denied before the handler runs, with
// codes.ResourceExhausted and the usual details, metadata and pushback.
// The other calls run, and the code the handler returns decides once it
// has returned: a counting code is charged on every check (with the
// call's cost), another is not (under o.ChargeFirst: refunded), and with
// o.ResetOnSuccess an OK call resets the client's count (only OK is a
// success; any other code that does not count is simply not charged; the
// [httplimit.WithCheck] checks are never reset). o.ChargeFirst consumes
// the quota at the decision and refunds it when the code does not count:
// exact under concurrency, but a client at its limit is denied until its
// calls in flight have ended; the default peeks before the handler and
// charges after it (see [httplimit.WithOutcome] for that mode's bound).
//
// The code is the one the client will see: status.FromError of the
// handler's error (codes.OK for nil), a context error as grpc-go maps it
// (context.Canceled is Canceled, context.DeadlineExceeded is
// DeadlineExceeded), codes.Unknown for any other error. A stream's code
// is its handler's (one charge per stream, after it ends). Counting fails
// safe: a handler that panicked (the panic goes on unchanged) and a call
// whose context had ended when its handler returned (the client
// cancelled, its deadline passed), whatever code the handler returned,
// are each a counted failure, charged whatever o.Count says and never a
// success (httplimit.OutcomePanic). The messages
// [PerMessage] limits are not counted by outcome, and PerMessage panics
// when given an Interceptor with WithOutcome. Denials written by the
// interceptor itself are never counted. The rate-limit metadata is that
// of the check before the handler (remaining as if this call will count).
//
// Every limiter's store must implement the quota verbs (memstore,
// redisstore, the fleet tier), or New fails. [httplimit.WithOutcome],
// the HTTP adapters' option (and what a rules file's count: builds), also
// works on gRPC: its Count sees the code's HTTP status (google.rpc's
// mapping, grpc-gateway's: StatusIn(401) counts Unauthenticated), so a
// Count of CodeIn given to it never matches. Give one of the two: New
// fails when given both, in either order. Errors of the store calls after
// the handler go to the error hook ([httplimit.WithErrorHook]), which
// names the code as "status 1000+code" (status 1016: Unauthenticated); an
// OK call is status 200. o.Count must not be nil.
func WithOutcome(o httplimit.Outcome) httplimit.Option {
	return httplimit.AdapterOption("grpclimit", outcomeMark, o)
}

// outcomeMark is the name of WithOutcome's adapter option (its Count
// over the engine's status numbers): New tells it from
// httplimit.WithOutcome by it.
const outcomeMark = "WithOutcome"

// CodeIn returns a [WithOutcome] Count that accepts exactly the given
// codes (CodeIn(codes.Unauthenticated): failed logins).
func CodeIn(cs ...codes.Code) func(status int) bool {
	cs = slices.Clone(cs)
	return func(s int) bool { return slices.Contains(cs, codeOf(s)) }
}

// CodeNotOK is a [WithOutcome] Count that accepts every code but
// codes.OK: every failed call counts.
func CodeNotOK(status int) bool { return codeOf(status) != codes.OK }

// The status numbers the engine's outcome sees for a gRPC code: OK is
// 200 (a success, below 400, for ResetOnSuccess), any other code
// codeBase+code (never a success).
const codeBase = 1000

func statusOf(c codes.Code) int {
	if c == codes.OK {
		return 200
	}
	return codeBase + int(c)
}

func codeOf(s int) codes.Code {
	if s == 200 {
		return codes.OK
	}
	return codes.Code(s - codeBase)
}

// codeOfErr is the code a client sees for a handler's error, as grpc-go's
// server computes it.
func codeOfErr(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return status.FromContextError(err).Code()
}

// settle settles res's outcome with the code of the handler's err.
func (i *Interceptor) settle(ctx context.Context, res *httplimit.Result, err error) {
	c := codeOfErr(err)
	if i.httpOutcome {
		i.e.Outcome(ctx, res, httpStatus(c))
		return
	}
	i.e.Outcome(ctx, res, statusOf(c))
}

// httpStatus is the HTTP status that [httplimit.WithOutcome]'s Count (and
// a rules file's count:) sees for a call that ended with code c, when
// given to [New] instead of [WithOutcome]: the mapping of
// google.rpc.Code and grpc-gateway. OK 200; InvalidArgument,
// FailedPrecondition, OutOfRange 400; Unauthenticated 401;
// PermissionDenied 403; NotFound 404; AlreadyExists, Aborted 409;
// ResourceExhausted 429; Canceled 499; Unknown, Internal, DataLoss (and
// any unknown code) 500; Unimplemented 501; Unavailable 503;
// DeadlineExceeded 504. Every code but OK is 400 or above, so only OK is a
// success for ResetOnSuccess. Several codes share a status: to count by
// the code itself, use WithOutcome.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return 200
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return 400
	case codes.Unauthenticated:
		return 401
	case codes.PermissionDenied:
		return 403
	case codes.NotFound:
		return 404
	case codes.AlreadyExists, codes.Aborted:
		return 409
	case codes.ResourceExhausted:
		return 429
	case codes.Canceled:
		return 499
	case codes.Unimplemented:
		return 501
	case codes.Unavailable:
		return 503
	case codes.DeadlineExceeded:
		return 504
	}
	return 500
}
