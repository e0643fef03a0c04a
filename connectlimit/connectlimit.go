package connectlimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Interceptor limits the calls a Connect handler serves: a
// connect.Interceptor for connect.WithInterceptors on the handler
// (unary and server streaming, client streaming and bidirectional
// calls alike: a streaming call is decided once, when it starts). On a
// client it does nothing. Build it with [New]; the zero value is not
// usable. It is safe for concurrent use.
//
// Each call is decided with the procedure ("/pkg.Service/Method") as
// the route: the default scope is the procedure alone (every Connect
// call is a POST or, for idempotent calls, a GET, which share the
// quota). The client key defaults to the TCP peer (connect.Peer.Addr),
// or comes from the request headers through httplimit.WithKey
// (keyfuncs.Header, keyfuncs.APIKey, keyfuncs.JWTClaim read
// connect.Request.Header). Health checks and reflection
// (/grpc.health.v1.Health/*, /grpc.reflection.v1.ServerReflection/*,
// /grpc.reflection.v1alpha.ServerReflection/*) are never limited.
//
// An admitted call's response carries X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (headers; on an error
// response, the error's metadata). A denial is a *connect.Error:
//
//   - quota exhausted: connect.CodeResourceExhausted with the
//     google.rpc.RetryInfo detail (the exact retry delay; none when the
//     call's cost exceeds the limit and retrying cannot help), then
//     QuotaFailure and ErrorInfo (reason RATE_LIMIT_EXCEEDED, domain
//     limitkit), and the metadata X-RateLimit-* and Retry-After (whole
//     seconds, at least 1);
//   - store failure under FailClosed: connect.CodeUnavailable with a
//     RetryInfo of one second and Retry-After: 1;
//   - no key under httplimit.WithNoKeyDeny: connect.CodeUnauthenticated;
//   - a key function's refusal: connect.CodeInvalidArgument.
//
// Counting by outcome (httplimit.WithOutcome) sees the HTTP status the
// Connect protocol maps the call's code to (OK 200, Unauthenticated 401,
// PermissionDenied 403, NotFound 404, ResourceExhausted 429, Canceled
// 499, Unavailable 503, Unknown and Internal 500, ...): e.g.
// httplimit.StatusIn(401) counts failed logins. A handler that panics
// counts as a failure, and its panic goes on.
type Interceptor struct {
	g *engine
}

var _ connect.Interceptor = (*Interceptor)(nil)

// New returns the interceptor applying l (and any httplimit.WithCheck
// limiters) with the options of package httplimit, or a configuration
// error naming the option to fix (an option that shapes an HTTP
// response, httplimit.WithDenyStatus or WithDenyBody, is one: a Connect
// denial is an error of its own protocol).
func New(l *core.Limiter, opts ...httplimit.Option) (*Interceptor, error) {
	g, err := newEngine(l, opts)
	if err != nil {
		return nil, err
	}
	return &Interceptor{g: g}, nil
}

// exempt reports whether procedure is a health check or reflection,
// which are never limited: a load balancer's probe must not be refused
// because a client spent the quota.
func exempt(procedure string) bool {
	return strings.HasPrefix(procedure, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(procedure, "/grpc.reflection.v1.ServerReflection/") ||
		strings.HasPrefix(procedure, "/grpc.reflection.v1alpha.ServerReflection/")
}

// WrapUnary implements connect.Interceptor: it decides a unary call on
// the handler side before next runs.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		spec := req.Spec()
		if spec.IsClient || exempt(spec.Procedure) {
			return next(ctx, req)
		}
		if f := i.g.inflight; f != nil {
			f.Enter()
			defer f.Exit()
		}
		var res decision
		v := call{ctx: ctx, procedure: spec.Procedure, peer: req.Peer().Addr, header: req.Header()}
		i.g.decide(ctx, &v, &res)
		if skipped(&res) {
			return next(ctx, req)
		}
		if !passed(&res) {
			return nil, i.denial(&res)
		}
		ctx = withIdentity(ctx, &res)
		var resp connect.AnyResponse
		var err error
		if i.g.outcome {
			resp, err = i.unaryCounted(ctx, &res, next, req)
		} else {
			resp, err = next(ctx, req)
		}
		i.answer(&res, resp, err)
		return resp, err
	}
}

func (i *Interceptor) unaryCounted(ctx context.Context, res *decision, next connect.UnaryFunc, req connect.AnyRequest) (connect.AnyResponse, error) {
	done := false
	defer func() {
		if !done {
			i.g.settle(ctx, res, outcomePanic)
		}
	}()
	resp, err := next(ctx, req)
	done = true
	i.g.settle(ctx, res, httpStatus(connect.CodeOf(err), err))
	return resp, err
}

// answer puts an admitted call's rate-limit fields on its response, or
// on its error's metadata.
func (i *Interceptor) answer(res *decision, resp connect.AnyResponse, err error) {
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			i.g.setHeaders(res, ce.Meta())
		}
		return
	}
	if resp != nil {
		i.g.setHeaders(res, resp.Header())
	}
}

// WrapStreamingClient implements connect.Interceptor: a client's calls
// are not limited.
func (i *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor: it decides a
// streaming call once, when it starts, before next runs.
func (i *Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		spec := conn.Spec()
		if exempt(spec.Procedure) {
			return next(ctx, conn)
		}
		if f := i.g.inflight; f != nil {
			f.Enter()
			defer f.Exit()
		}
		var res decision
		v := call{ctx: ctx, procedure: spec.Procedure, peer: conn.Peer().Addr, header: conn.RequestHeader()}
		i.g.decide(ctx, &v, &res)
		if skipped(&res) {
			return next(ctx, conn)
		}
		if !passed(&res) {
			return i.denial(&res)
		}
		i.g.setHeaders(&res, conn.ResponseHeader())
		ctx = withIdentity(ctx, &res)
		if !i.g.outcome {
			return next(ctx, conn)
		}
		done := false
		defer func() {
			if !done {
				i.g.settle(ctx, &res, outcomePanic)
			}
		}()
		err := next(ctx, conn)
		done = true
		i.g.settle(ctx, &res, httpStatus(connect.CodeOf(err), err))
		return err
	}
}

// denial is the Connect error of a denied call, with the rate-limit
// fields (and Retry-After) in its metadata.
func (i *Interceptor) denial(res *decision) *connect.Error {
	rej := i.g.reject(res)
	d := &rej.Decision
	var ce *connect.Error
	switch rej.Reason {
	case reasonNoKey:
		ce = connect.NewError(connect.CodeUnauthenticated, errors.New("limitkit: the call carries no rate-limit key"))
	case reasonRefused:
		ce = connect.NewError(connect.CodeInvalidArgument, errors.New("limitkit: the call's rate-limit key cannot be read"))
	case reasonUnavailable:
		ce = connect.NewError(connect.CodeUnavailable, errors.New("limitkit: rate limiter unavailable"))
		addDetail(ce, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	default:
		msg := "limitkit: rate limit exceeded for policy " + strconv.Quote(d.Policy)
		if d.RetryAfter == core.Never {
			msg += "; the call's cost exceeds the limit, retrying will not help"
		} else {
			msg += "; retry after " + d.RetryAfter.String()
		}
		ce = connect.NewError(connect.CodeResourceExhausted, errors.New(msg))
		if d.RetryAfter != core.Never {
			addDetail(ce, &errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)})
		}
		quota := &errdetails.QuotaFailure_Violation{Subject: "policy:" + d.Policy, Description: "quota exhausted"}
		info := &errdetails.ErrorInfo{Reason: "RATE_LIMIT_EXCEEDED", Domain: "limitkit", Metadata: map[string]string{"policy": d.Policy}}
		if d.Limit.Requests > 0 {
			quota.Description = fmt.Sprintf("%d requests per %s", d.Limit.Requests, d.Limit.Window)
			info.Metadata["limit"] = strconv.FormatInt(d.Limit.Requests, 10)
			info.Metadata["window"] = d.Limit.Window.String()
		}
		addDetail(ce, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{quota}})
		addDetail(ce, info)
	}
	i.g.setHeaders(res, ce.Meta())
	return ce
}

func addDetail(ce *connect.Error, m proto.Message) {
	if d, err := connect.NewErrorDetail(m); err == nil {
		ce.AddDetail(d)
	}
}

// httpStatus is the HTTP status the Connect protocol maps c to (the
// Connect specification's table), what httplimit.WithOutcome's Count
// sees; err is the call's error, nil for OK.
func httpStatus(c connect.Code, err error) int {
	if err == nil {
		return http.StatusOK
	}
	switch c {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// call is the keyfuncs.Request view of a Connect call.
type call struct {
	ctx       context.Context
	procedure string
	peer      string
	header    http.Header
}

var _ keyfuncs.Request = (*call)(nil)

// Method is POST: Connect calls are POSTs (an idempotent unary call may
// be a GET; it shares the procedure's quota).
func (c *call) Method() string { return http.MethodPost }

// Route is the procedure ("/pkg.Service/Method").
func (c *call) Route() string { return c.procedure }

// AnyMethod implements httplimit.Request: the scope is the
// procedure alone.
func (c *call) AnyMethod() bool { return true }

func (c *call) Path() string { return c.procedure }

func (c *call) Header(name string) string { return c.header.Get(name) }

func (c *call) HeaderValues(name string) []string { return c.header.Values(name) }

// Query is "": a Connect call's query string carries the protocol's own
// parameters, never a key.
func (c *call) Query(string) string { return "" }

// RemoteAddr is the TCP peer (connect.Peer.Addr).
func (c *call) RemoteAddr() string { return c.peer }

func (c *call) Value(key any) any { return c.ctx.Value(key) }
