package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// retryRig is a server limited by ic whose calls and streams are counted
// as they arrive (before the limiter), and a client built with the
// retrying interceptors, whose waits are recorded and advance the
// server's clock instead of sleeping.
type retryRig struct {
	cc       *grpc.ClientConn
	attempts atomic.Int64
	mu       sync.Mutex
	waits    []time.Duration
}

func newRetryRig(t *testing.T, clock *core.ManualClock, ic *grpclimit.Interceptor, advance bool, cfg grpclimit.ClientConfig) *retryRig {
	t.Helper()
	rig := &retryRig{}
	countU := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		rig.attempts.Add(1)
		return h(ctx, req)
	}
	countS := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		rig.attempts.Add(1)
		return h(srv, ss)
	}
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(countU, ic.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(countS, ic.StreamServerInterceptor()))
	register(s)
	go func() {
		_ = s.Serve(&peerListener{lis, fixedAddr(&net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 1})})
	}()
	t.Cleanup(s.Stop)
	sleep := func(ctx context.Context, d time.Duration) error {
		rig.mu.Lock()
		rig.waits = append(rig.waits, d)
		rig.mu.Unlock()
		if advance {
			clock.Advance(d)
		}
		return ctx.Err()
	}
	if !grpclimit.Sleeps(cfg) {
		cfg = grpclimit.WithSleep(cfg, sleep)
	}
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(cfg)),
		grpc.WithStreamInterceptor(grpclimit.StreamClientInterceptor(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	rig.cc = cc
	return rig
}

func (r *retryRig) take() (attempts int64, waits []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.waits
	r.waits = nil
	return r.attempts.Swap(0), w
}

func sameWaits(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The unary interceptor waits exactly the RetryInfo delay, then retries;
// the waits here advance the server's clock, so the retry is admitted.
func TestUnaryClientRetriesAfterDelay(t *testing.T) {
	clock := core.NewManualClock(t0)
	rig := newRetryRig(t, clock, grpclimit.MustNew(newLimiter(t, 3, clock)), true, grpclimit.ClientConfig{})
	for i := 0; i < 3; i++ {
		if r := call(t, rig.cc, sayMethod); r.code != codes.OK {
			t.Fatal(r.st)
		}
	}
	rig.take()
	clock.Advance(5 * time.Second) // the next slot is 15 s away
	if r := call(t, rig.cc, sayMethod); r.code != codes.OK {
		t.Fatalf("retried call: %v", r.st)
	}
	if n, w := rig.take(); n != 2 || !sameWaits(w, []time.Duration{15 * time.Second}) {
		t.Fatalf("server saw %d attempts, client waited %v; want 2 and [15s]", n, w)
	}
}

// Without the clock moving, the call gives up after the maximum attempts
// with the last denial.
func TestUnaryClientMaxAttempts(t *testing.T) {
	clock := core.NewManualClock(t0)
	rig := newRetryRig(t, clock, grpclimit.MustNew(newLimiter(t, 1, clock)), false, grpclimit.ClientConfig{MaxAttempts: 4})
	call(t, rig.cc, sayMethod)
	rig.take()
	if r := call(t, rig.cc, sayMethod); r.code != codes.ResourceExhausted {
		t.Fatalf("got %v, want the denial", r.st)
	}
	if n, w := rig.take(); n != 4 || len(w) != 3 || w[0] != time.Minute {
		t.Fatalf("server saw %d attempts, client waited %v; want 4 and 3 waits of 1m", n, w)
	}
}

// Bounded by the context and the maximum wait: a delay past the deadline
// or above ClientConfig.MaxWait is not waited; a context done while waiting ends
// the call with its status.
func TestUnaryClientBounds(t *testing.T) {
	clock := core.NewManualClock(t0)
	rig := newRetryRig(t, clock, grpclimit.MustNew(newLimiter(t, 1, clock)), true, grpclimit.ClientConfig{MaxWait: 30 * time.Second})
	call(t, rig.cc, sayMethod)
	rig.take()
	// a minute's delay is above the 30 s maximum
	if r := call(t, rig.cc, sayMethod); r.code != codes.ResourceExhausted {
		t.Fatalf("got %v, want the denial", r.st)
	}
	if n, w := rig.take(); n != 1 || len(w) != 0 {
		t.Fatalf("above the maximum wait: %d attempts, waits %v", n, w)
	}
	clock.Advance(40 * time.Second) // 20 s to wait now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := rig.cc.Invoke(ctx, sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("delay past the deadline: %v, want the denial at once", err)
	}
	if n, w := rig.take(); n != 1 || len(w) != 0 {
		t.Fatalf("past the deadline: %d attempts, waits %v", n, w)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel2 := grpclimit.WithSleep(grpclimit.ClientConfig{}, func(context.Context, time.Duration) error { cancel(); return context.Canceled })
	rig2 := newRetryRig(t, clock, grpclimit.MustNew(newLimiter(t, 1, clock)), false, cancel2)
	call(t, rig2.cc, sayMethod)
	err = rig2.cc.Invoke(ctx, sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue))
	if status.Code(err) != codes.Canceled {
		t.Fatalf("canceled while waiting: %v", err)
	}
}

// A denial that says retrying will not help (cost above the limit:
// pushback -1, no RetryInfo), a code other than the two retryable ones,
// and a no-key Unauthenticated are returned after one attempt.
func TestUnaryClientNoRetry(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 2, clock), httplimit.WithCost(func(keyfuncs.Request) int64 { return 5 }))
	rig := newRetryRig(t, clock, ic, true, grpclimit.ClientConfig{})
	if r := call(t, rig.cc, sayMethod); r.code != codes.ResourceExhausted || r.trailer.Get("grpc-retry-pushback-ms")[0] != "-1" {
		t.Fatalf("got %v, trailer %v", r.st, r.trailer)
	}
	if n, w := rig.take(); n != 1 || len(w) != 0 {
		t.Fatalf("never-admissible call: %d attempts, waits %v", n, w)
	}
	key, err := keyfuncs.APIKey("x-api-key", "")
	if err != nil {
		t.Fatal(err)
	}
	rig = newRetryRig(t, clock, grpclimit.MustNew(newLimiter(t, 2, clock), httplimit.WithKey(key), httplimit.WithNoKeyDeny()), true, grpclimit.ClientConfig{})
	if r := call(t, rig.cc, sayMethod); r.code != codes.Unauthenticated {
		t.Fatalf("got %v", r.st)
	}
	if n, w := rig.take(); n != 1 || len(w) != 0 {
		t.Fatalf("no key: %d attempts, waits %v", n, w)
	}
}

func TestRetryDelay(t *testing.T) {
	re := status.Error(codes.ResourceExhausted, "x")
	for _, c := range []struct {
		name    string
		err     error
		trailer metadata.MD
		d       time.Duration
		ok      bool
	}{
		{"pushback only", re, metadata.Pairs("grpc-retry-pushback-ms", "1500"), 1500 * time.Millisecond, true},
		{"pushback -1", re, metadata.Pairs("grpc-retry-pushback-ms", "-1"), 0, false},
		{"pushback garbage", re, metadata.Pairs("grpc-retry-pushback-ms", "soon"), 0, false},
		{"no hint", re, nil, 0, false},
		{"other code", status.Error(codes.Internal, "x"), metadata.Pairs("grpc-retry-pushback-ms", "10"), 0, false},
		{"unavailable", status.Error(codes.Unavailable, "x"), metadata.Pairs("grpc-retry-pushback-ms", "1000"), time.Second, true},
		{"not a status", errors.New("x"), metadata.Pairs("grpc-retry-pushback-ms", "10"), 0, false},
	} {
		if d, ok := grpclimit.RetryDelay(c.err, c.trailer); d != c.d || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, d, ok, c.d, c.ok)
		}
	}
}

// A server-streaming call denied at open is opened again after the delay,
// its one message sent again; a bidirectional stream is not retried.
func TestStreamClientRetries(t *testing.T) {
	clock := core.NewManualClock(t0)
	rig := newRetryRig(t, clock, grpclimit.MustNew(newLimiter(t, 1, clock)), true, grpclimit.ClientConfig{})
	serverStream := func(desc *grpc.StreamDesc, method ...string) ([]string, error) {
		m := streamMethod
		if len(method) > 0 {
			m = method[0]
		}
		cs, err := rig.cc.NewStream(context.Background(), desc, m)
		if err != nil {
			return nil, err
		}
		if err := cs.SendMsg(wrapperspb.String("once")); err != nil && err != io.EOF {
			return nil, err
		}
		if err := cs.CloseSend(); err != nil {
			return nil, err
		}
		var got []string
		for {
			out := new(wrapperspb.StringValue)
			if err := cs.RecvMsg(out); err == io.EOF {
				return got, nil
			} else if err != nil {
				return got, err
			}
			got = append(got, out.GetValue())
		}
	}
	one := &grpc.StreamDesc{ServerStreams: true}
	if got, err := serverStream(one); err != nil || len(got) != 1 {
		t.Fatalf("first stream: %v %v", got, err)
	}
	rig.take()
	got, err := serverStream(one)
	if err != nil || len(got) != 1 || got[0] != "once" {
		t.Fatalf("retried stream: %v %v", got, err)
	}
	if n, w := rig.take(); n != 2 || !sameWaits(w, []time.Duration{time.Minute}) {
		t.Fatalf("server saw %d streams, client waited %v; want 2 and [1m]", n, w)
	}
	// bidirectional: the denial as is
	_, err = serverStream(&grpc.StreamDesc{ServerStreams: true, ClientStreams: true})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("bidi stream: %v, want the denial", err)
	}
	if n, w := rig.take(); n != 1 || len(w) != 0 {
		t.Fatalf("bidi stream: %d attempts, waits %v", n, w)
	}
	// a denial after a message arrived is not retried: the stream had
	// delivered
	clock.Advance(time.Minute)
	got, err = serverStream(one, "/limitkit.example.Echo/Half")
	if status.Code(err) != codes.ResourceExhausted || len(got) != 1 {
		t.Fatalf("stream denied after a message: %v %v", got, err)
	}
	if n, w := rig.take(); n != 1 || len(w) != 0 {
		t.Fatalf("stream denied after a message: %d attempts, waits %v", n, w)
	}
}
