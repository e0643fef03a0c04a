package grpclimit_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
)

// The actions of the fail-safe service's handlers, by request value.
const (
	fsGood  = "good"  // OK
	fsBad   = "bad"   // Unauthenticated
	fsPanic = "panic" // the handler panics
	fsGone  = "gone"  // the client cancels the call; the handler then answers OK
)

// fsRig serves a unary and a server-streaming method whose handlers act
// by their request (the fs constants), behind a recovery interceptor
// (outermost: it turns a panic into Internal, as grpc-ecosystem's
// recovery does) and the limiter's. settled receives one value per call
// once the limiter's interceptor has returned, so that a test's next
// call sees what the last one charged.
type fsRig struct {
	cc      *grpc.ClientConn
	entered chan struct{}
	settled chan struct{}
}

const (
	fsUnary  = "/limitkit.test.FailSafe/Call"
	fsStream = "/limitkit.test.FailSafe/Stream"
)

func fsAct(ctx context.Context, r *fsRig, v string) error {
	switch v {
	case fsBad:
		return status.Error(codes.Unauthenticated, "wrong password")
	case fsPanic:
		panic("the handler panics")
	case fsGone:
		r.entered <- struct{}{}
		<-ctx.Done() // the client went away; the handler answers OK all the same
	}
	return nil
}

func newFSRig(t *testing.T, ic *grpclimit.Interceptor) *fsRig {
	t.Helper()
	r := &fsRig{entered: make(chan struct{}, 1), settled: make(chan struct{}, 1)}
	recoverUnary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, status.Error(codes.Internal, "panic")
			}
			r.settled <- struct{}{}
		}()
		return h(ctx, req)
	}
	recoverStream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = status.Error(codes.Internal, "panic")
			}
			r.settled <- struct{}{}
		}()
		return h(srv, ss)
	}
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(recoverUnary, ic.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(recoverStream, ic.StreamServerInterceptor()))
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "limitkit.test.FailSafe",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fsUnary}, func(ctx context.Context, req any) (any, error) {
				if err := fsAct(ctx, r, req.(*wrapperspb.StringValue).GetValue()); err != nil {
					return nil, err
				}
				return req, nil
			})
		}}},
		Streams: []grpc.StreamDesc{{StreamName: "Stream", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			in := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			if err := fsAct(ss.Context(), r, in.GetValue()); err != nil {
				return err
			}
			return ss.SendMsg(in)
		}}},
	}, struct{}{})
	lis := bufconn.Listen(1 << 20)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	r.cc = cc
	return r
}

// call makes one call (a unary one, or a stream when stream is set) as
// user alice with value v, and returns its code once the limiter has
// settled it. For fsGone the client cancels the call once the handler
// runs.
func (r *fsRig) call(t *testing.T, stream bool, v string) codes.Code {
	t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "alice"))
	defer cancel()
	if v == fsGone {
		go func() {
			<-r.entered
			cancel()
		}()
	}
	var err error
	if !stream {
		err = r.cc.Invoke(ctx, fsUnary, wrapperspb.String(v), new(wrapperspb.StringValue))
	} else {
		var cs grpc.ClientStream
		if cs, err = r.cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, fsStream); err == nil {
			if err = cs.SendMsg(wrapperspb.String(v)); err == nil {
				_ = cs.CloseSend()
				err = cs.RecvMsg(new(wrapperspb.StringValue))
			}
		}
	}
	<-r.settled
	return status.Code(err)
}

// Issue 40: counting by outcome fails safe on gRPC. A panicking handler
// and a call whose client went away (cancelled; the handler answered OK
// all the same) are each a counted failure whatever Count says: with a
// limit of 2 failed logins, the third call is denied before its handler.
// A success is not charged.
func TestOutcomeFailsSafeGRPC(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "unary"
		if stream {
			name = "stream"
		}
		for _, tc := range []struct {
			action string
			code   codes.Code
		}{
			{fsGood, codes.OK}, // the control: successes are never charged
			{fsBad, codes.Unauthenticated},
			{fsPanic, codes.Internal},
			{fsGone, codes.Canceled},
		} {
			t.Run(name+"/"+tc.action, func(t *testing.T) {
				r := newFSRig(t, outcomeInterceptor(t, 2, core.NewManualClock(t0),
					httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated), ResetOnSuccess: true}))
				for i := 0; i < 2; i++ {
					if got := r.call(t, stream, tc.action); got != tc.code {
						t.Fatalf("call %d (%s): %v, want %v", i+1, tc.action, got, tc.code)
					}
				}
				want := codes.ResourceExhausted
				if tc.action == fsGood {
					want = codes.OK
				}
				if got := r.call(t, stream, fsGood); got != want {
					t.Fatalf("after two %s calls: %v, want %v", tc.action, got, want)
				}
			})
		}
	}
}

// The pushback trailer is RetryAfter in milliseconds rounded up: a wait
// with a part below a millisecond (1/3 s at 3 a second) is never
// announced shorter than it is, or a client retrying on the pushback
// would be denied again.
func TestPushbackRoundsSubMillisecondUp(t *testing.T) {
	clock := core.NewManualClock(t0)
	store := memstore.MustNew()
	t.Cleanup(func() { store.Close() })
	l := core.MustNewLimiter(store, core.Policy{Name: "echo", Limits: []core.Limit{core.PerSecond(3)}}, core.WithClock(clock))
	cc := bufClient(t, grpclimit.MustNew(l), "203.0.113.7")[0]
	for i := 0; i < 3; i++ {
		if r := call(t, cc, sayMethod); r.code != codes.OK {
			t.Fatalf("call %d: %v", i+1, r.st)
		}
	}
	r := call(t, cc, sayMethod)
	if r.code != codes.ResourceExhausted {
		t.Fatalf("fourth call: %v, want ResourceExhausted", r.st)
	}
	var delay time.Duration
	for _, d := range r.st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay%time.Millisecond == 0 {
		t.Fatalf("RetryInfo %v has no part below a millisecond: the test cannot tell rounding up from down", delay)
	}
	want := strconv.FormatInt(int64(delay/time.Millisecond)+1, 10)
	if got := r.trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != want {
		t.Fatalf("pushback %v for a RetryAfter of %v, want [%s] (milliseconds rounded up)", got, delay, want)
	}
}
