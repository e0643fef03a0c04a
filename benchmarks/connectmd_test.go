package benchmarks

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/connectlimit"
	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// connectRows is the Connect counterpart of BenchmarkGRPCMetadata's
// rows (issue 39: "the Connect interceptor's added cost measured the same
// way against a plain Connect handler"): "plain" is a Connect unary
// function alone, called as the handler calls it after decoding;
// "limitkit" the same function behind connectlimit's interceptor with
// its defaults but the key (an API key header: a request built outside
// a handler has no peer), memstore, 1000 a second on stepClock (never
// denied, the remaining quota below 1000), the three X-RateLimit
// headers written on the response. req makes one client's request.
func connectRows(b *testing.B) (plain, limited connect.UnaryFunc, req func() *connect.Request[wrapperspb.StringValue]) {
	b.Helper()
	st := memstore.MustNew()
	b.Cleanup(func() { _ = st.Close() })
	lim := core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.PerSecond(1000)}}, core.WithClock(&stepClock{}))
	byKey, err := keyfuncs.Header("X-Api-Key")
	if err != nil {
		b.Fatal(err)
	}
	ic, err := connectlimit.New(lim, httplimit.WithKey(byKey))
	if err != nil {
		b.Fatal(err)
	}
	plain = func(_ context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		return connect.NewResponse(wrapperspb.String("hi")), nil
	}
	n := 0
	req = func() *connect.Request[wrapperspb.StringValue] {
		n++
		r := connect.NewRequest(wrapperspb.String("hi"))
		r.Header().Set("X-Api-Key", "k"+string(rune('a'+n%26)))
		return r
	}
	return plain, ic.WrapUnary(plain), req
}

// BenchmarkConnectInterceptor is BenchmarkGRPCMetadata for Connect:
// each row serially (one client; cpu-ns/op, the process's CPU time per
// call) and in parallel (a client per goroutine), with allocations. The
// interceptor's added cost is limitkit's row minus plain's.
func BenchmarkConnectInterceptor(b *testing.B) {
	plain, limited, newReq := connectRows(b)
	for _, c := range []struct {
		name string
		f    connect.UnaryFunc
	}{{"plain", plain}, {"limitkit", limited}} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			ctx, req := context.Background(), newReq()
			var resp connect.AnyResponse
			c0 := processCPU()
			for b.Loop() {
				var err error
				if resp, err = c.f(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
			if c.name == "limitkit" && resp.Header().Get("X-Ratelimit-Remaining") == "" {
				b.Fatalf("no rate-limit headers: %v", resp.Header())
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			reqs := make(chan *connect.Request[wrapperspb.StringValue], 64)
			for range cap(reqs) {
				reqs <- newReq()
			}
			b.RunParallel(func(pb *testing.PB) {
				ctx, req := context.Background(), <-reqs
				for pb.Next() {
					if _, err := c.f(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkConnectInterceptorCPU is BenchmarkConnectInterceptor's serial
// rows run round robin as BenchmarkGRPCMetadataCPU's (chunks of 1000
// calls per row in turn on one locked thread, timed by its CPU time):
// each row's median cpu-ns, and added-ns, the median per-round
// difference of limitkit's row and plain's.
func BenchmarkConnectInterceptorCPU(b *testing.B) {
	plain, limited, newReq := connectRows(b)
	ctx := context.Background()
	row := func(name string, f connect.UnaryFunc) rrRow {
		req := newReq()
		return rrRow{name, func() {
			if _, err := f(ctx, req); err != nil {
				b.Fatal(err)
			}
		}}
	}
	r := roundRobin(b, []rrRow{row("plain", plain), row("limitkit", limited)}, 1000)
	r.report(b)
	jl, jp := r.row("limitkit"), r.row("plain")
	d := make([]float64, len(r.cpu[jl]))
	for i := range d {
		d[i] = r.cpu[jl][i] - r.cpu[jp][i]
	}
	b.ReportMetric(median(d), "added-ns")
}
