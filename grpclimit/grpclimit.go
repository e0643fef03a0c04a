package grpclimit

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// Metadata keys the interceptors write. The rate-limit keys are sent on
// every limited call unless WithHeaders(HeaderNone) turns them off: as
// header metadata on an admitted call, and in the trailers of a denial,
// with the pushback key. A denial is a trailers-only response (headers
// sent separately would commit the call, and grpc-go retries only
// uncommitted ones): grpc-go clients read a denial's metadata with
// grpc.Trailer.
const (
	// mdLimit is the binding limit's size (requests per window).
	mdLimit = "x-ratelimit-limit"
	// mdRemaining is what is left of it after this call.
	mdRemaining = "x-ratelimit-remaining"
	// mdReset is when the quota is full again: Unix seconds by default,
	// seconds from now with WithResetDelta().
	mdReset = "x-ratelimit-reset"
	// mdRetryAfter is the whole seconds to wait, on denials
	// (HeaderRetryAfter, on by default).
	mdRetryAfter = "retry-after"
	// mdPushback is the grpc-retry-pushback-ms trailer of a denial: the
	// milliseconds (rounded up) a grpc-go client with a retry policy
	// waits before its next attempt, or -1 ("do not retry") when no wait
	// would help.
	mdPushback = "grpc-retry-pushback-ms"
)

// ErrorInfo values of a quota denial.
const (
	// errorReason is errdetails.ErrorInfo.Reason of a quota denial.
	errorReason = "RATE_LIMIT_EXCEEDED"
	// errorDomain is errdetails.ErrorInfo.Domain of every denial.
	errorDomain = "limitkit"
)

// Interceptor holds a validated configuration and hands out the unary
// and stream server interceptors applying it. It is immutable and safe
// for concurrent use; both interceptors of one Interceptor share its
// limiters, so a unary and a stream method each have their own quota (the
// scope is the full method name) on the same store.
type Interceptor struct {
	e        *httplimit.Engine
	inFlight *core.InFlight
	outcome  bool // WithOutcome: settle each admitted call after its handler
	// httplimit.WithOutcome (a rule's count:), not grpclimit's: the
	// outcome is the code's HTTP status (httpStatus)
	httpOutcome bool
	// limits are the shared metadata values of the limit sizes sent
	// (limitText)
	limits atomic.Pointer[[]*sharedText]
	// mds are the shared header maps of the triples sent last (headerMD)
	mds [mdSlots]atomic.Pointer[sharedMD]
}

// adapter is this package to the engine: it writes no HTTP response
// (WithDenyStatus and WithDenyBody are refused), reads its WithOutcome's
// mark, and reports outcomes.
var adapter = httplimit.Adapter{
	Name:           "grpclimit",
	Options:        map[string]reflect.Type{outcomeMark: reflect.TypeFor[func(int) bool]()},
	Outcome:        true,
	NoHTTPResponse: true,
	Denials: "grpclimit answers a denial with a status: codes.ResourceExhausted with RetryInfo, " +
		"QuotaFailure and ErrorInfo details and the retry-after and grpc-retry-pushback-ms trailers " +
		"(see grpclimit.Interceptor); wrap the interceptor to change it",
}

// New validates the options and returns an Interceptor applying l (and
// any [httplimit.WithCheck] limiters) to every call, or a configuration error
// naming the option to fix.
//
// Defaults: the key is the transport peer's IP (port stripped, IPv6 by
// /64; no metadata is trusted); the scope is the full method name, so
// each method has its own quota per client, and every method the server
// did not register (a call served by grpc.UnknownServiceHandler) shares
// one, "(unregistered)"; the registered health checking and reflection
// methods (matched exactly) are never limited. The HTTP-only options [httplimit.WithDenyStatus] and
// [httplimit.WithDenyBody], and the HTTP adapters' own options (their
// WithDenyHandler, nethttp.WithRoute), are refused with an error naming
// them; header options name metadata keys; [httplimit.WithTiers] and [httplimit.WithOverrides]
// apply as on HTTP. Counting by outcome is [WithOutcome], by status code;
// [httplimit.WithOutcome] (a rules file's count:) also works, counting by
// the code's HTTP status (google.rpc's mapping, grpc-gateway's).
func New(l *core.Limiter, opts ...httplimit.Option) (*Interceptor, error) {
	e, err := httplimit.NewAdapterEngine(adapter, l, opts...)
	if err != nil {
		return nil, err
	}
	i := &Interceptor{e: e, inFlight: e.InFlight(), outcome: e.CountsOutcome()}
	byCode, err := httplimit.AdapterOptionValue[func(int) bool](e, outcomeMark)
	if err != nil {
		return nil, err
	}
	i.httpOutcome = i.outcome && byCode == nil
	return i, nil
}

// MustNew is [New] that panics on a configuration error, for start-up
// code.
func MustNew(l *core.Limiter, opts ...httplimit.Option) *Interceptor {
	i, err := New(l, opts...)
	if err != nil {
		panic(err)
	}
	return i
}

// exempt reports whether fullMethod is exempt by default: exactly a method
// of the health checking service (grpc.health.v1.Health: Check, Watch,
// List) or of server reflection (grpc.reflection.v1 and v1alpha
// ServerReflection: ServerReflectionInfo). The interceptors exempt a call
// only when the server also registered the method: behind
// grpc.UnknownServiceHandler (a proxy), a call to one of these names that
// the server does not serve itself is limited as any unregistered method
// ("(unregistered)"), and so is any other name under those services
// ("/grpc.health.v1.Health/Nope").
func exempt(fullMethod string) bool {
	switch fullMethod {
	case "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch", "/grpc.health.v1.Health/List",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo":
		return true
	}
	return false
}

// UnaryServerInterceptor returns the unary interceptor: the call is
// decided before the handler runs; a denied call never reaches it.
func (i *Interceptor) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if i.inFlight != nil {
			i.inFlight.Enter()
			defer i.inFlight.Exit()
		}
		if i.outcome {
			return i.unaryCounted(ctx, req, info, handler)
		}
		if err := i.admit(ctx, info.FullMethod, true, nil); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// unaryCounted is the unary interceptor under WithOutcome: decided (a
// peek, or a take under ChargeFirst) before the handler, settled by the
// handler's code after it.
func (i *Interceptor) unaryCounted(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var res httplimit.Result
	if st := i.decide(ctx, info.FullMethod, true, nil, false, &res); st != nil {
		return nil, st.Err()
	}
	done := false
	defer func() {
		if !done {
			i.e.Outcome(ctx, &res, httplimit.OutcomePanic)
		}
	}()
	resp, err := handler(ctx, req)
	done = true
	i.settle(ctx, &res, err)
	return resp, err
}

// StreamServerInterceptor returns the stream interceptor: a stream is
// admitted (and charged once) when it opens. By default the messages on
// an admitted stream are not limited; [PerMessage] charges each received
// message to a policy of its own.
func (i *Interceptor) StreamServerInterceptor(opts ...StreamOption) grpc.StreamServerInterceptor {
	var so streamOptions
	for _, o := range opts {
		o(&so)
	}
	if so.perMessage != nil && so.perMessage.outcome {
		panic("grpclimit: PerMessage: the message Interceptor counts by outcome (WithOutcome), which a received message has none of; build it without WithOutcome")
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if i.inFlight != nil {
			i.inFlight.Enter()
			defer i.inFlight.Exit()
		}
		// grpc-go hands the unknown-service handler's calls a nil srv
		registered := srv != nil
		var res httplimit.Result
		if st := i.decide(ss.Context(), info.FullMethod, registered, ss, false, &res); st != nil {
			return st.Err()
		}
		if !i.outcome {
			return i.serveStream(srv, ss, info, handler, so.perMessage)
		}
		done := false
		defer func() {
			if !done {
				i.e.Outcome(ss.Context(), &res, httplimit.OutcomePanic)
			}
		}()
		err := i.serveStream(srv, ss, info, handler, so.perMessage)
		done = true
		i.settle(ss.Context(), &res, err)
		return err
	}
}

// serveStream runs the handler of an admitted stream, its received
// messages limited by perMessage when set.
func (i *Interceptor) serveStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler, perMessage *Interceptor) error {
	registered := srv != nil
	if perMessage == nil || registered && exempt(info.FullMethod) {
		return handler(srv, ss)
	}
	ms := &messageStream{ServerStream: ss, ic: perMessage, method: info.FullMethod, registered: registered}
	err := handler(srv, ms)
	if d := ms.denied.Load(); d != nil {
		// the denial ends the stream, whatever the handler made of
		// RecvMsg's error
		return d.Err()
	}
	return err
}

// StreamOption configures [Interceptor.StreamServerInterceptor].
type StreamOption func(*streamOptions)

type streamOptions struct{ perMessage *Interceptor }

// PerMessage also limits the messages a client sends on an admitted
// stream: each message RecvMsg receives is decided by m (its limiter and
// its key, scope, no-key, skip and cost options; the scope defaults to the
// full method name, as for calls) once it has arrived and before the
// handler sees it. Long-lived streams are where a limit per call is not
// enough: one admitted stream could otherwise carry any number of
// messages.
//
// An admitted message writes no metadata (the stream's headers carry the
// stream policy's). A denied message is not handed to the handler:
// RecvMsg returns the denial's status (codes.ResourceExhausted with the
// RetryInfo, QuotaFailure and ErrorInfo details of a denied call; or
// Unavailable, Unauthenticated as for a call), and every later RecvMsg
// returns it again; its metadata and pushback are set as the stream's
// trailers; and the stream ends with that status when the handler
// returns, whatever the handler returns. A nil m turns the option off.
// m's WithInFlight count is not entered per message. An m built with
// [WithOutcome] makes StreamServerInterceptor panic: a message has no
// outcome.
func PerMessage(m *Interceptor) StreamOption {
	return func(o *streamOptions) { o.perMessage = m }
}

// messageStream charges each received message to ic.
type messageStream struct {
	grpc.ServerStream
	ic         *Interceptor
	method     string
	registered bool // the server registered method
	denied     atomic.Pointer[status.Status]
}

// RecvMsg receives the next message and decides it; after a denial it
// returns the denial again without reading.
func (s *messageStream) RecvMsg(m any) error {
	if d := s.denied.Load(); d != nil {
		return d.Err()
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	var res httplimit.Result
	if st := s.ic.decide(s.Context(), s.method, s.registered, s.ServerStream, true, &res); st != nil {
		s.denied.Store(st)
		return st.Err()
	}
	return nil
}

// admit decides the call and writes its metadata to ss, or for a unary
// call (ss nil) through the context (grpc.SetHeader, grpc.SetTrailer: no
// sink value to allocate); a non-nil error is the denial's status.
func (i *Interceptor) admit(ctx context.Context, fullMethod string, registered bool, ss grpc.ServerStream) error {
	var res httplimit.Result
	if st := i.decide(ctx, fullMethod, registered, ss, false, &res); st != nil {
		return st.Err()
	}
	return nil
}

// decide decides one call, or with message set one message received on
// stream ss, and returns the denial's status, or nil. An admitted call's
// metadata goes in the headers, an admitted message writes none, and a
// denial's metadata goes in the trailers. The decision is left in res
// (zero for an exempt method), for the outcome under WithOutcome. A
// method the server did not register (registered false) is never exempt
// and has the route unregisteredRoute.
func (i *Interceptor) decide(ctx context.Context, fullMethod string, registered bool, ss grpc.ServerStream, message bool, res *httplimit.Result) *status.Status {
	if registered && exempt(fullMethod) {
		return nil
	}
	req := requests.Get().(*request)
	req.init(ctx, fullMethod, registered)
	i.e.Decide(ctx, req, nil, res)
	*req = request{} // keeps no context alive in the pool
	requests.Put(req)
	if res.Action == httplimit.Skip {
		return nil
	}
	if res.Action == httplimit.Pass {
		if message {
			return nil
		}
		// fails only once headers were sent: nothing to do
		if ss != nil {
			if md := i.headerMD(res); md != nil {
				_ = ss.SetHeader(md)
			}
		} else if st := grpc.ServerTransportStreamFromContext(ctx); st != nil {
			// grpc.SetHeader's path, the stream looked up once
			if md := i.headerMD(res); md != nil {
				_ = st.SetHeader(md)
			}
		}
		return nil
	}
	md := i.metadata(res)
	// A denial's metadata all goes in the trailers: a response with
	// headers of its own is "committed", and grpc-go retries (with the
	// pushback) only a trailers-only one. Clients read it with
	// grpc.Trailer (grpc.Header is empty on a trailers-only response).
	st, pushback := denial(i.e.Reject(res))
	if pushback != "" {
		if md == nil {
			md = make(metadata.MD, 1)
		}
		md[mdPushback] = []string{pushback}
	}
	if md != nil {
		if ss != nil {
			ss.SetTrailer(md)
		} else {
			_ = grpc.SetTrailer(ctx, md)
		}
	}
	return st
}

// denial is the status of rej and its pushback trailer value ("" for
// none):
//
//   - ReasonLimited: ResourceExhausted, with RetryInfo (the exact
//     RetryAfter; absent when no wait helps), QuotaFailure and ErrorInfo
//     (RATE_LIMIT_EXCEEDED);
//   - ReasonUnavailable (a FailClosed store failed): Unavailable, with
//     RetryInfo of 1 s, as HTTP's Retry-After: 1;
//   - ReasonNoKey: Unauthenticated, no details, no pushback;
//   - ReasonRefused (a keyfuncs.Refusal): InvalidArgument, likewise.
func denial(rej httplimit.Rejection) (*status.Status, string) {
	d := &rej.Decision
	switch rej.Reason {
	case httplimit.ReasonNoKey:
		return status.New(codes.Unauthenticated, "limitkit: the call carries no rate-limit key"), ""
	case httplimit.ReasonRefused:
		return status.New(codes.InvalidArgument, "limitkit: the call's rate-limit key cannot be read"), ""
	case httplimit.ReasonUnavailable:
		st := status.New(codes.Unavailable, "limitkit: rate limiter unavailable")
		if wd, err := st.WithDetails(
			&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)},
			&errdetails.ErrorInfo{Reason: "RATE_LIMITER_UNAVAILABLE", Domain: errorDomain, Metadata: map[string]string{"policy": d.Policy}},
		); err == nil {
			st = wd
		}
		return st, "1000"
	}
	msg := "limitkit: rate limit exceeded for policy " + strconv.Quote(d.Policy)
	info := &errdetails.ErrorInfo{Reason: errorReason, Domain: errorDomain, Metadata: map[string]string{"policy": d.Policy}}
	quota := &errdetails.QuotaFailure_Violation{Subject: "policy:" + d.Policy, Description: "quota exhausted"}
	if d.Limit.Requests > 0 {
		quota.Description = fmt.Sprintf("%d requests per %s", d.Limit.Requests, d.Limit.Window)
		info.Metadata["limit"] = strconv.FormatInt(d.Limit.Requests, 10)
		info.Metadata["window"] = d.Limit.Window.String()
	}
	var pushback string
	details := make([]protoadapt.MessageV1, 0, 3)
	if d.RetryAfter == core.Never {
		pushback = "-1"
		msg += "; the call's cost exceeds the limit, retrying will not help"
	} else {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)})
		ms := (d.RetryAfter + time.Millisecond - 1) / time.Millisecond
		pushback = strconv.FormatInt(int64(ms), 10)
		msg += "; retry after " + d.RetryAfter.String()
	}
	details = append(details, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{quota}}, info)
	st := status.New(codes.ResourceExhausted, msg)
	if wd, err := st.WithDetails(details...); err == nil {
		st = wd
	}
	return st, pushback
}
