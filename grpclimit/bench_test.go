package grpclimit_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
	"github.com/limitkit/limitkit/keyfuncs"
)

// benchStream is the server transport stream grpc.SetHeader writes to,
// keeping the last header so the benchmark checks it was written.
type benchStream struct{ hdr metadata.MD }

func (s *benchStream) Method() string                  { return sayMethod }
func (s *benchStream) SetHeader(md metadata.MD) error  { s.hdr = md; return nil }
func (s *benchStream) SendHeader(md metadata.MD) error { return nil }
func (s *benchStream) SetTrailer(md metadata.MD) error { return nil }

// benchCtx is a unary call's context as grpc-go builds it: incoming
// metadata with an API key, a TCP peer, a transport stream.
func benchCtx(st *benchStream) context.Context {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k-0123456789", "user-agent", "grpc-go/1.85.0"))
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40001}})
	return grpc.NewContextWithServerTransportStream(ctx, st)
}

var (
	benchInfo = &grpc.UnaryServerInfo{FullMethod: sayMethod}
	benchReq  = wrapperspb.String("hi")
)

func echo(_ context.Context, req any) (any, error) { return req, nil }

func benchUnary(b *testing.B, ic grpc.UnaryServerInterceptor) {
	st := &benchStream{}
	ctx := benchCtx(st)
	adaptertest.SerialLoop(b, func() {
		if ic == nil {
			_, _ = echo(ctx, benchReq)
			return
		}
		if _, err := ic(ctx, benchReq, benchInfo, echo); err != nil {
			b.Fatal(err)
		}
	})
}

// benchLimiter never denies during a benchmark: a 2^30 burst.
func benchLimiter(b *testing.B) *core.Limiter {
	b.Helper()
	st := memstore.MustNew()
	b.Cleanup(func() { _ = st.Close() })
	return core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
}

func headerKey(b *testing.B) keyfuncs.Func {
	f, err := keyfuncs.Header("x-api-key")
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkUnary: the unary interceptor's cost per call over a bare
// handler, keyed per method by the x-api-key metadata (raw value) or the
// peer IP, with the rate-limit metadata on and off; beside it the usual
// hand-made setup, go-grpc-middleware's ratelimit interceptor shape over a
// mutex-guarded map of x/time/rate limiters keyed the same way (method and
// x-api-key), which writes no metadata.
func BenchmarkUnary(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchUnary(b, nil) })
	b.Run("limitkit/apikey/md-off", func(b *testing.B) {
		benchUnary(b, grpclimit.MustNew(benchLimiter(b), httplimit.WithKey(headerKey(b)), httplimit.WithHeaders(httplimit.HeaderNone)).UnaryServerInterceptor())
	})
	b.Run("limitkit/apikey/md-on", func(b *testing.B) {
		benchUnary(b, grpclimit.MustNew(benchLimiter(b), httplimit.WithKey(headerKey(b))).UnaryServerInterceptor())
	})
	b.Run("limitkit/peerip/md-off", func(b *testing.B) {
		benchUnary(b, grpclimit.MustNew(benchLimiter(b), httplimit.WithHeaders(httplimit.HeaderNone)).UnaryServerInterceptor())
	})
	b.Run("limitkit/peerip/md-on", func(b *testing.B) {
		benchUnary(b, grpclimit.MustNew(benchLimiter(b)).UnaryServerInterceptor())
	})
	b.Run("limitkit/apikey/md-off/outcome", func(b *testing.B) {
		// counting by outcome: a peek before the handler, nothing charged
		// after its OK
		benchUnary(b, grpclimit.MustNew(benchLimiter(b), httplimit.WithKey(headerKey(b)), httplimit.WithHeaders(httplimit.HeaderNone),
			grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated)})).UnaryServerInterceptor())
	})
	b.Run("xrate-map/apikey", func(b *testing.B) {
		benchUnary(b, xrateInterceptor(&rateMap{m: map[string]*rate.Limiter{}}))
	})
}

// rateMap is the usual hand-made limiter: one x/time/rate limiter per
// method and API key in a map under one mutex.
type rateMap struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (r *rateMap) allow(key string) bool {
	r.mu.Lock()
	l, ok := r.m[key]
	if !ok {
		l = rate.NewLimiter(rate.Limit(1<<30), 1<<30)
		r.m[key] = l
	}
	r.mu.Unlock()
	return l.Allow()
}

// xrateInterceptor is go-grpc-middleware v2's ratelimit.UnaryServerInterceptor
// (call Limit, answer ResourceExhausted on an error) with a Limit that
// keys by full method and the x-api-key metadata.
func xrateInterceptor(r *rateMap) grpc.UnaryServerInterceptor {
	limit := func(ctx context.Context, method string) error {
		key := method
		if v := metadata.ValueFromIncomingContext(ctx, "x-api-key"); len(v) > 0 {
			key = method + "|" + v[0]
		}
		if !r.allow(key) {
			return status.Error(codes.ResourceExhausted, "rate limited")
		}
		return nil
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := limit(ctx, info.FullMethod); err != nil {
			return nil, status.Errorf(codes.ResourceExhausted, "%s is rejected by grpc_ratelimit middleware, please retry later. %s", info.FullMethod, err)
		}
		return handler(ctx, req)
	}
}

// TestUnaryAllocs pins the allocations of an admitted unary call keyed by
// the peer IP without metadata: one, the request view the key functions
// read (an interface value); a regression shows here before in a profile.
func TestUnaryAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	st := memstore.MustNew()
	defer st.Close()
	lim := core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
	ic := grpclimit.MustNew(lim, httplimit.WithHeaders(httplimit.HeaderNone)).UnaryServerInterceptor()
	ctx := benchCtx(&benchStream{})
	n := testing.AllocsPerRun(1000, func() {
		if _, err := ic(ctx, benchReq, benchInfo, echo); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Fatalf("%.1f allocations per call, want at most 1", n)
	}
}

// TestUnaryOutcomeAllocs pins the allocations of an admitted call under
// WithOutcome that does not count (a peek, nothing charged): the request
// view and what the engine keeps for the outcome (with nothing to settle,
// no detached context is made).
func TestUnaryOutcomeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	st := memstore.MustNew()
	defer st.Close()
	lim := core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
	ic := grpclimit.MustNew(lim, httplimit.WithHeaders(httplimit.HeaderNone),
		grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated)})).UnaryServerInterceptor()
	ctx := benchCtx(&benchStream{})
	n := testing.AllocsPerRun(1000, func() {
		if _, err := ic(ctx, benchReq, benchInfo, echo); err != nil {
			t.Fatal(err)
		}
	})
	if n > 3 {
		t.Fatalf("%.1f allocations per call, want at most 3", n)
	}
	t.Logf("%.1f allocations per call", n)
}
