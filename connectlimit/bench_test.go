package connectlimit_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/connectlimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
	"github.com/limitkit/limitkit/keyfuncs"
)

func benchInterceptor(b *testing.B) *connectlimit.Interceptor {
	b.Helper()
	l := adaptertest.BenchLimiter(b)
	byKey, err := keyfuncs.Header("X-Api-Key")
	if err != nil {
		b.Fatal(err)
	}
	ic, err := connectlimit.New(l, httplimit.WithKey(byKey))
	if err != nil {
		b.Fatal(err)
	}
	return ic
}

// BenchmarkUnaryDirect calls the unary function directly, as the
// Connect handler would after decoding: "plain" is the handler's
// function alone, "limited" the same behind the interceptor (memstore,
// one hot API key, the three X-RateLimit headers on the response). The
// difference is the interceptor's added cost (docs/benchmarks.md).
func BenchmarkUnaryDirect(b *testing.B) {
	next := func(_ context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		return connect.NewResponse(wrapperspb.String("hi")), nil
	}
	req := connect.NewRequest(wrapperspb.String("hi"))
	req.Header().Set("X-Api-Key", "k1")
	run := func(b *testing.B, f connect.UnaryFunc) {
		b.Run("serial", func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if _, err := f(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := connect.NewRequest(wrapperspb.String("hi"))
				r.Header().Set("X-Api-Key", "k1")
				ctx := context.Background()
				for pb.Next() {
					if _, err := f(ctx, r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
	b.Run("plain", func(b *testing.B) { run(b, next) })
	b.Run("limited", func(b *testing.B) { run(b, benchInterceptor(b).WrapUnary(next)) })
}

// BenchmarkHandler serves a unary Connect call (Connect protocol, JSON)
// through the handler's ServeHTTP, without and with the interceptor.
func BenchmarkHandler(b *testing.B) {
	handler := func(_ context.Context, r *connect.Request[sv]) (*connect.Response[sv], error) {
		return connect.NewResponse(r.Msg), nil
	}
	run := func(b *testing.B, h http.Handler) {
		serve := func() int {
			r := httptest.NewRequest(http.MethodPost, say, bytes.NewReader([]byte(`"hi"`)))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("X-Api-Key", "k1")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		b.Run("serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c := serve(); c != http.StatusOK {
					b.Fatalf("status %d", c)
				}
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					serve()
				}
			})
		})
	}
	b.Run("plain", func(b *testing.B) { run(b, connect.NewUnaryHandler(say, handler)) })
	b.Run("limited", func(b *testing.B) {
		run(b, connect.NewUnaryHandler(say, handler, connect.WithInterceptors(benchInterceptor(b))))
	})
}
