package httplimit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/internal/respond"
	"github.com/limitkit/limitkit/keyfuncs"
)

func benchEngine(b *testing.B, opts ...Option) *Engine {
	st, err := memstore.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	l := core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
	e, err := NewEngine("bench", l, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func benchRequest() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://example.com/bench", nil)
	r.RemoteAddr = "203.0.113.7:40001"
	r.Pattern = "GET /bench"
	return r
}

func BenchmarkDecide(b *testing.B) {
	e := benchEngine(b)
	r := benchRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := e.Decide(ctx, keyfuncs.FromHTTP(r))
		if res.Action != Pass {
			b.Fatal(res.Action)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	e := benchEngine(b)
	r := keyfuncs.FromHTTP(benchRequest())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var sbuf [96]byte
		_, _, _ = e.key(ctx, &e.checks[0], r, e.appendScope(sbuf[:0], r))
	}
}

// BenchmarkCachedKey is BenchmarkKey through the key cache: a returning
// client on a known route.
func BenchmarkCachedKey(b *testing.B) {
	e := benchEngine(b)
	r := keyfuncs.FromHTTP(benchRequest())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = e.cachedKey(ctx, &e.checks[0], r)
	}
}

func benchFields(b *testing.B, opts ...Option) {
	e := benchEngine(b, opts...)
	res := e.Decide(context.Background(), keyfuncs.FromHTTP(benchRequest()))
	b.ReportAllocs()
	for b.Loop() {
		var f Fields
		e.Fields(&res, &f)
	}
}

func BenchmarkFieldsEpoch(b *testing.B) { benchFields(b) }
func BenchmarkFieldsDelta(b *testing.B) { benchFields(b, WithResetFormat(ResetDelta)) }

func BenchmarkSetHTTP(b *testing.B) {
	e := benchEngine(b)
	res := e.Decide(context.Background(), keyfuncs.FromHTTP(benchRequest()))
	var f Fields
	e.Fields(&res, &f)
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		clear(h)
		respond.SetHTTP(h, &f.f)
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		_ = time.Now()
	}
}

// BenchmarkHeaderSetBaseline is what writing the three headers costs with
// http.Header.Set, for comparison with BenchmarkSetHTTP.
func BenchmarkHeaderSetBaseline(b *testing.B) {
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		clear(h)
		h.Set("X-RateLimit-Limit", "1073741824")
		h.Set("X-RateLimit-Remaining", "1073741823")
		h.Set("X-RateLimit-Reset", "1700000030")
	}
}

// BenchmarkEngineSetHTTP is the adapters' header write of a common
// response: Triple and respond.SetHTTPTriple into a cleared header.
func BenchmarkEngineSetHTTP(b *testing.B) {
	e := benchEngine(b)
	res := e.Decide(context.Background(), keyfuncs.FromHTTP(benchRequest()))
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		clear(h)
		e.SetHTTP(&res, h)
	}
}

// BenchmarkDecideDirectStore measures the engine's second code path for
// a core.DirectStore: "direct" calls the memstore's TakeTo with the engine's
// clock reading and writes the decision into the Result; "limiter" is the
// same decision through core.Limiter.AllowNAt on a store the engine does
// not recognise (TestDirectTakeMatchesLimiter holds the two to the same
// answers). The direct path stays only while this benchmark shows it
// saving time on the adapters' hot path.
func BenchmarkDecideDirectStore(b *testing.B) {
	for _, hide := range []bool{false, true} {
		name := "direct"
		if hide {
			name = "limiter"
		}
		b.Run(name, func(b *testing.B) {
			st := memstore.MustNew()
			b.Cleanup(func() { _ = st.Close() })
			var store core.Store = st
			if hide {
				store = hiddenStore{st}
			}
			l := core.MustNewLimiter(store, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
			e, err := NewEngine("bench", l)
			if err != nil {
				b.Fatal(err)
			}
			if (e.checks[0].direct == nil) != hide {
				b.Fatal("the engine took the other path")
			}
			r := keyfuncs.FromHTTP(benchRequest())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var res Result
				e.DecideInto(ctx, r, &res)
				if res.Action != Pass {
					b.Fatal(res.Action)
				}
			}
		})
	}
}
