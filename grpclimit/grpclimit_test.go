package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
	"github.com/limitkit/limitkit/keyfuncs"
)

const (
	sayMethod    = "/limitkit.example.Echo/Say"
	otherMethod  = "/limitkit.example.Echo/Other"
	streamMethod = "/limitkit.example.Echo/Chat"
	healthMethod = "/grpc.health.v1.Health/Check"
)

// replyCode is the request metadata whose value (a code number) the
// unary test methods end with instead of echoing, for counting by outcome.
const replyCode = "x-reply-code"

func register(s *grpc.Server) {
	unary := func(service, name string) grpc.MethodDesc {
		return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				if v := metadata.ValueFromIncomingContext(ctx, replyCode); len(v) > 0 {
					n, _ := strconv.Atoi(v[0])
					return nil, status.Error(codes.Code(n), "replied")
				}
				return req, nil
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + service + "/" + name}, h)
		}}
	}
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "limitkit.example.Echo",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{unary("limitkit.example.Echo", "Say"), unary("limitkit.example.Echo", "Other")},
		Streams: []grpc.StreamDesc{{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			for {
				in := new(wrapperspb.StringValue)
				if err := ss.RecvMsg(in); err != nil {
					return nil
				}
				if err := ss.SendMsg(in); err != nil {
					return err
				}
			}
		}}, {StreamName: "Half", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			// one message, then a denial asking for a retry: a stream
			// that already delivered must not be opened again
			in := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			if err := ss.SendMsg(in); err != nil {
				return err
			}
			st, _ := status.New(codes.ResourceExhausted, "later").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
			return st.Err()
		}}},
	}, struct{}{})
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "grpc.health.v1.Health",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{unary("grpc.health.v1.Health", "Check")},
	}, struct{}{})
}

// peerListener is a bufconn listener whose accepted connections report
// the next address sent on addrs as their remote address.
type peerListener struct {
	*bufconn.Listener
	addrs chan net.Addr
}

func (l *peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return addrConn{c, <-l.addrs}, nil
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// bufClient returns a client connected over bufconn as peer ip.
func bufClient(t *testing.T, ic *grpclimit.Interceptor, ips ...string) []*grpc.ClientConn {
	t.Helper()
	return bufServer(t, []grpc.ServerOption{grpc.UnaryInterceptor(ic.UnaryServerInterceptor()), grpc.StreamInterceptor(ic.StreamServerInterceptor())}, ips...)
}

// bufServer serves the test services with opts over bufconn and returns
// a client connected as each of ips.
func bufServer(t *testing.T, opts []grpc.ServerOption, ips ...string) []*grpc.ClientConn {
	t.Helper()
	lis := &peerListener{bufconn.Listen(1 << 20), make(chan net.Addr, len(ips))}
	s := grpc.NewServer(opts...)
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	var ccs []*grpc.ClientConn
	for i, ip := range ips {
		lis.addrs <- &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000 + i}
		cc, err := grpc.NewClient("passthrough:///bufnet",
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
		if err != nil {
			t.Fatal(err)
		}
		cc.Connect()
		// connect now, so this connection takes this address
		for s := cc.GetState(); s.String() != "READY"; s = cc.GetState() {
			if !cc.WaitForStateChange(context.Background(), s) {
				t.Fatal("connection never ready")
			}
		}
		t.Cleanup(func() { cc.Close() })
		ccs = append(ccs, cc)
	}
	return ccs
}

type result struct {
	code    codes.Code
	st      *status.Status
	header  metadata.MD
	trailer metadata.MD
}

func call(t *testing.T, cc *grpc.ClientConn, method string, md ...string) result {
	t.Helper()
	ctx := context.Background()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	var r result
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, method, wrapperspb.String("hi"), out, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	r.st = status.Convert(err)
	r.code = r.st.Code()
	if err == nil && out.GetValue() != "hi" {
		t.Fatalf("echo answered %q", out.GetValue())
	}
	return r
}

func newLimiter(t *testing.T, n int64, clock core.Clock) *core.Limiter {
	t.Helper()
	store := memstore.MustNew()
	t.Cleanup(func() { store.Close() })
	return core.MustNewLimiter(store, core.Policy{Name: "echo", Limits: []core.Limit{core.PerMinute(n)}}, core.WithClock(clock))
}

func apiKey(t testing.TB) keyfuncs.Func {
	f, err := keyfuncs.APIKey("X-API-Key", "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var t0 = time.Unix(1_700_000_000, 0)

func TestPerMethodPerAPIKeyQuotaExact(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 3, clock), httplimit.WithKey(apiKey(t)))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	for _, m := range []string{sayMethod, otherMethod} {
		for _, key := range []string{"alice", "bob"} {
			for i := 1; i <= 4; i++ {
				r := call(t, cc, m, "x-api-key", key)
				want := codes.OK
				if i > 3 {
					want = codes.ResourceExhausted
				}
				if r.code != want {
					t.Fatalf("%s key %s call %d: %v, want %v", m, key, i, r.st, want)
				}
				md := r.header
				if i > 3 { // a denial is trailers-only: its metadata is in the trailer
					md = r.trailer
				}
				if got := md.Get("x-ratelimit-limit"); len(got) != 1 || got[0] != "3" {
					t.Fatalf("%s: x-ratelimit-limit %q", m, got)
				}
				wantRem := strconv.Itoa(max(0, 3-i))
				if got := md.Get("x-ratelimit-remaining"); len(got) != 1 || got[0] != wantRem {
					t.Fatalf("%s call %d: x-ratelimit-remaining %q, want %s", m, i, got, wantRem)
				}
			}
		}
	}
	clock.Advance(time.Minute)
	if r := call(t, cc, sayMethod, "x-api-key", "alice"); r.code != codes.OK {
		t.Fatalf("after the window: %v", r.st)
	}
}

func TestPeerIPFallback(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 2, clock), httplimit.WithKey(apiKey(t)))
	ccs := bufClient(t, ic, "203.0.113.7", "203.0.113.8", "2001:db8::1", "2001:db8::2")
	for i, cc := range ccs {
		want := []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}
		if i == 3 { // same IPv6 /64 as ccs[2]: its quota is spent
			want = []codes.Code{codes.ResourceExhausted}
		}
		for j, w := range want {
			if r := call(t, cc, sayMethod); r.code != w {
				t.Fatalf("peer %d call %d: %v, want %v", i, j, r.st, w)
			}
		}
	}
	// an API key is a quota of its own, apart from the peer's
	if r := call(t, ccs[0], sayMethod, "x-api-key", "k"); r.code != codes.OK {
		t.Fatalf("keyed call from a limited peer: %v", r.st)
	}
}

func TestDenialDetails(t *testing.T) {
	clock := core.NewManualClock(t0)
	lim := newLimiter(t, 1, clock)
	ic := grpclimit.MustNew(lim, httplimit.WithKey(apiKey(t)))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	call(t, cc, sayMethod, "x-api-key", "a")
	clock.Advance(12*time.Second + 345*time.Millisecond)
	r := call(t, cc, sayMethod, "x-api-key", "a")
	if r.code != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", r.st)
	}
	// what the limiter says the wait is, for the same key, at the same time
	in := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "a"))
	k, err := apiKey(t)(grpclimit.NewRequest(in, sayMethod))
	if err != nil {
		t.Fatal(err)
	}
	d, err := lim.PeekN(context.Background(), sayMethod+"|"+k, 1)
	if err != nil {
		t.Fatal(err)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	var info *errdetails.ErrorInfo
	for _, x := range r.st.Details() {
		switch v := x.(type) {
		case *errdetails.RetryInfo:
			retry = v
		case *errdetails.QuotaFailure:
			quota = v
		case *errdetails.ErrorInfo:
			info = v
		}
	}
	if retry == nil || quota == nil || info == nil {
		t.Fatalf("details %v", r.st.Details())
	}
	if got := retry.GetRetryDelay().AsDuration(); got != d.RetryAfter || got <= 0 {
		t.Fatalf("RetryInfo %v, limiter's RetryAfter %v", got, d.RetryAfter)
	}
	if info.Reason != "RATE_LIMIT_EXCEEDED" || info.Domain != "limitkit" || info.Metadata["policy"] != "echo" {
		t.Fatalf("ErrorInfo %v", info)
	}
	if len(quota.Violations) != 1 || quota.Violations[0].Subject != "policy:echo" {
		t.Fatalf("QuotaFailure %v", quota)
	}
	wantMS := strconv.FormatInt(int64((d.RetryAfter+time.Millisecond-1)/time.Millisecond), 10)
	if got := r.trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != wantMS {
		t.Fatalf("pushback %q, want %s", got, wantMS)
	}
	if len(r.header) != 0 {
		t.Fatalf("a denial sent headers %v: grpc-go would not retry it", r.header)
	}
	if got := r.trailer.Get("retry-after"); len(got) != 1 || got[0] != "48" {
		t.Fatalf("retry-after %q", got)
	}
}

// openStream opens a Chat stream and does one round trip; it returns the
// stream's status (OK when the message echoed) and its header.
func openStream(t *testing.T, cc *grpc.ClientConn, md ...string) (codes.Code, metadata.MD) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, streamMethod)
	if err != nil {
		return status.Code(err), nil
	}
	for i := 0; i < 3; i++ { // messages on an admitted stream are not charged
		if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
			// the server ended the stream (a denial at open can
			// arrive before the first send): its status is what
			// RecvMsg returns
			return status.Code(cs.RecvMsg(new(wrapperspb.StringValue))), nil
		}
		out := new(wrapperspb.StringValue)
		if err := cs.RecvMsg(out); err != nil {
			return status.Code(err), nil
		}
	}
	hdr, _ := cs.Header()
	_ = cs.CloseSend()
	return codes.OK, hdr
}

func TestStreamLimitedAtOpen(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 2, clock), httplimit.WithKey(apiKey(t)))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		code, hdr := openStream(t, cc, "x-api-key", "s")
		if code != want {
			t.Fatalf("stream %d: %v, want %v", i, code, want)
		}
		if want == codes.OK && len(hdr.Get("x-ratelimit-remaining")) != 1 {
			t.Fatalf("stream %d: header %v", i, hdr)
		}
	}
	// the stream method's quota is its own: Say is untouched
	if r := call(t, cc, sayMethod, "x-api-key", "s"); r.code != codes.OK {
		t.Fatalf("unary after streams: %v", r.st)
	}
}

func TestHealthExempt(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 1, clock))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	for i := 0; i < 5; i++ {
		r := call(t, cc, healthMethod)
		if r.code != codes.OK {
			t.Fatalf("health check %d: %v", i, r.st)
		}
		if len(r.header.Get("x-ratelimit-limit")) != 0 {
			t.Fatalf("exempt call carries rate-limit metadata %v", r.header)
		}
	}
	if !grpclimit.Exempt("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo") ||
		!grpclimit.Exempt("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo") ||
		grpclimit.Exempt(sayMethod) {
		t.Fatal("Exempt")
	}
	call(t, cc, sayMethod)
	if r := call(t, cc, sayMethod); r.code != codes.ResourceExhausted {
		t.Fatalf("Say not limited after exempt calls: %v", r.st)
	}
}

// Many goroutines on one key: exactly the quota is admitted.
func TestConcurrentCallsExact(t *testing.T) {
	clock := core.NewManualClock(t0)
	const quota, workers, per = 50, 8, 20
	ic := grpclimit.MustNew(newLimiter(t, quota, clock), httplimit.WithKey(apiKey(t)))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				err := cc.Invoke(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "hot"),
					sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue))
				switch status.Code(err) {
				case codes.OK:
					ok.Add(1)
				case codes.ResourceExhausted:
					limited.Add(1)
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != quota || limited.Load() != workers*per-quota {
		t.Fatalf("admitted %d, limited %d; want %d and %d", ok.Load(), limited.Load(), quota, workers*per-quota)
	}
}

// One test over a real TCP listener: the peer is the real 127.0.0.1.
func TestOverTCP(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 2, clock))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(ic.UnaryServerInterceptor()), grpc.StreamInterceptor(ic.StreamServerInterceptor()))
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		r := call(t, cc, sayMethod)
		if r.code != want {
			t.Fatalf("call %d: %v, want %v", i, r.st, want)
		}
		if want == codes.ResourceExhausted && len(r.trailer.Get("grpc-retry-pushback-ms")) != 1 {
			t.Fatalf("no pushback trailer: %v", r.trailer)
		}
	}
}

func TestFailClosedIsUnavailable(t *testing.T) {
	env := adaptertest.NewEnv(t)
	lim := env.Limiter(t, core.Policy{Name: "echo", Limits: []core.Limit{core.PerMinute(5)}, FailMode: core.FailClosed})
	ic := grpclimit.MustNew(lim)
	cc := bufClient(t, ic, "203.0.113.7")[0]
	env.Store.SetFail(errors.New("store down"))
	r := call(t, cc, sayMethod)
	if r.code != codes.Unavailable || strings.Contains(r.st.Message(), "store down") {
		t.Fatalf("got %v, want Unavailable without the store's error text", r.st)
	}
	env.Store.SetFail(nil)
	if r := call(t, cc, sayMethod); r.code != codes.OK {
		t.Fatalf("after recovery: %v", r.st)
	}
}

func TestNoKeyDenyIsUnauthenticated(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 5, clock), httplimit.WithKey(apiKey(t)), httplimit.WithNoKeyDeny())
	cc := bufClient(t, ic, "203.0.113.7")[0]
	if r := call(t, cc, sayMethod); r.code != codes.Unauthenticated {
		t.Fatalf("no key: %v, want Unauthenticated", r.st)
	}
	if r := call(t, cc, sayMethod, "x-api-key", "k"); r.code != codes.OK {
		t.Fatalf("with a key: %v", r.st)
	}
}

func TestHeadersOff(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 1, clock), httplimit.WithHeaders(httplimit.HeaderNone))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	for i := 0; i < 2; i++ {
		r := call(t, cc, sayMethod)
		for k := range metadata.Join(r.header, r.trailer) {
			if strings.HasPrefix(k, "x-ratelimit") || k == "retry-after" {
				t.Fatalf("call %d: metadata %s with HeaderNone", i, k)
			}
		}
		if i == 1 && (r.code != codes.ResourceExhausted || len(r.trailer.Get("grpc-retry-pushback-ms")) != 1) {
			t.Fatalf("denial without headers: %v, trailer %v", r.st, r.trailer)
		}
	}
}

// A stock grpc-go client with a retry policy on RESOURCE_EXHAUSTED obeys
// the pushback trailer: it waits the server's RetryAfter (here a minute,
// past the call's deadline) instead of retrying at its own backoff.
// retryPolicyClient serves the test services behind count and ic's unary
// interceptor over bufconn (as peer 203.0.113.7) and returns a client
// whose service config retries RESOURCE_EXHAUSTED up to 4 attempts with
// grpc-go's own retry policy (backoff 1 ms up to maxBackoff); both are
// closed when the test ends.
func retryPolicyClient(t *testing.T, ic *grpclimit.Interceptor, count grpc.UnaryServerInterceptor, maxBackoff string) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(count, ic.UnaryServerInterceptor()))
	register(s)
	go func() {
		_ = s.Serve(&peerListener{lis, fixedAddr(&net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 1})})
	}()
	t.Cleanup(s.Stop)
	config := `{"methodConfig": [{"name": [{"service": "limitkit.example.Echo"}], "retryPolicy": {
		"maxAttempts": 4, "initialBackoff": "0.001s", "maxBackoff": "` + maxBackoff + `", "backoffMultiplier": 1,
		"retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}`
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithDefaultServiceConfig(config))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func TestRetryPolicyObeysPushback(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 1, clock))
	var attempts atomic.Int64
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		attempts.Add(1)
		return h(ctx, req)
	}
	cc := retryPolicyClient(t, ic, count, "0.002s")
	if r := call(t, cc, sayMethod); r.code != codes.OK {
		t.Fatal(r.st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := cc.Invoke(ctx, sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue))
	if code := status.Code(err); code != codes.ResourceExhausted && code != codes.DeadlineExceeded {
		t.Fatalf("second call: %v", err)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("server saw %d attempts, want 2: the client retried before the pushback", n)
	}
}

// fixedAddr is a channel that always gives a.
func fixedAddr(a net.Addr) chan net.Addr {
	c := make(chan net.Addr, 16)
	for i := 0; i < cap(c); i++ {
		c <- a
	}
	return c
}

func TestFailOpenAdmits(t *testing.T) {
	env := adaptertest.NewEnv(t)
	lim := env.Limiter(t, core.Policy{Name: "echo", Limits: []core.Limit{core.PerMinute(1)}, FailMode: core.FailOpen})
	var hooked atomic.Int64
	ic := grpclimit.MustNew(lim, httplimit.WithErrorHook(func(context.Context, error) { hooked.Add(1) }))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	env.Store.SetFail(errors.New("store down"))
	for i := 0; i < 3; i++ {
		if r := call(t, cc, sayMethod); r.code != codes.OK {
			t.Fatalf("call %d with a failed FailOpen store: %v", i, r.st)
		}
	}
	if hooked.Load() != 3 {
		t.Fatalf("error hook saw %d failures, want 3", hooked.Load())
	}
}

// A stock grpc-go client with a retry policy on RESOURCE_EXHAUSTED waits
// the pushback, then retries and gets through: the server's clock moves
// past the wait when it denies, and the retry arrives no sooner than the
// pushback after the denial (a lower bound, which a loaded machine only
// makes longer); the policy's own backoff is a millisecond.
func TestRetryPolicyWaitsPushbackThenRetries(t *testing.T) {
	const wait = 200 * time.Millisecond
	clock := core.NewManualClock(t0)
	store := memstore.MustNew()
	t.Cleanup(func() { store.Close() })
	lim := core.MustNewLimiter(store, core.Policy{Name: "echo", Limits: []core.Limit{core.Per(1, wait)}}, core.WithClock(clock))
	ic := grpclimit.MustNew(lim)
	var mu sync.Mutex
	var arrivals []time.Time
	var denied time.Time
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		resp, err := h(ctx, req)
		if status.Code(err) == codes.ResourceExhausted {
			mu.Lock()
			denied = time.Now()
			mu.Unlock()
			clock.Advance(wait) // the quota is back when the client returns
		}
		return resp, err
	}
	cc := retryPolicyClient(t, ic, count, "0.001s")
	if r := call(t, cc, sayMethod); r.code != codes.OK {
		t.Fatal(r.st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cc.Invoke(ctx, sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue)); err != nil {
		t.Fatalf("retried call: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 3 {
		t.Fatalf("server saw %d attempts, want 3 (admitted, denied, retried once)", len(arrivals))
	}
	if gap := arrivals[2].Sub(denied); gap < wait {
		t.Fatalf("the retry came %v after the denial, before the %v pushback", gap, wait)
	}
}
