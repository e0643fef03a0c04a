package httplimit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit/internal/respond"
	"github.com/limitkit/limitkit/internal/benchalt"
)

func benchEngine(b *testing.B, opts ...Option) *Engine {
	st, err := memstore.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	l := core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
	e, err := newEngineNamed("bench", l, opts...)
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
		res := decide(e, ctx, httpView{r})
		if res.Action != Pass {
			b.Fatal(res.Action)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	e := benchEngine(b)
	r := httpView{benchRequest()}
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
	r := httpView{benchRequest()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = e.cachedKey(ctx, &e.checks[0], r)
	}
}

func benchFields(b *testing.B, opts ...Option) {
	e := benchEngine(b, opts...)
	res := decide(e, context.Background(), httpView{benchRequest()})
	b.ReportAllocs()
	for b.Loop() {
		var f Fields
		e.Fields(&res, &f)
	}
}

func BenchmarkFieldsEpoch(b *testing.B) { benchFields(b) }
func BenchmarkFieldsDelta(b *testing.B) { benchFields(b, WithResetDelta()) }

func BenchmarkSetHTTP(b *testing.B) {
	e := benchEngine(b)
	res := decide(e, context.Background(), httpView{benchRequest()})
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
	res := decide(e, context.Background(), httpView{benchRequest()})
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		clear(h)
		e.SetHTTP(&res, h)
	}
}

// BenchmarkTripleShapes measures what the shapes of Engine.Triple cost an
// adapter that writes the common response's fields itself (fiberlimit),
// alternately (chunks in the same run), each followed by readTriple, as
// fiberlimit's setTriple reads them: "out" is Triple as it is (storing
// into the caller's *Triple); "value" is Triple returning its fields as a
// struct (tripleValue). The median per-round difference ns:value-out is
// what the out-parameter saves a request. None of the shapes
// allocates (allocs/op is 0 for 3000 calls an op); B/op is benchalt's
// bookkeeping of the rounds.
func BenchmarkTripleShapes(b *testing.B) {
	e := benchEngine(b)
	sameTriples(b, e)
	sameTriples(b, benchEngine(b, WithResetDelta()))
	res := decide(e, context.Background(), httpView{benchRequest()})
	var sum int64
	ways := []func(){
		func() {
			var t Triple
			if !e.Triple(&res, &t) {
				b.Fatal("not the triple")
			}
			sum += readTriple(&t)
		},
		func() {
			t, ok := tripleValue(e, &res)
			if !ok {
				b.Fatal("not the triple")
			}
			sum += readTriple(&t)
		},
	}
	b.ReportAllocs()
	benchalt.Ways(b, 1000, []string{"out", "value"}, ways)
	if sum == 0 {
		b.Fatal("no fields read")
	}
}

// sameTriples fails unless the shapes BenchmarkTripleShapes measures
// write what e.Triple writes for a common response.
func sameTriples(b *testing.B, e *Engine) {
	res := decide(e, context.Background(), httpView{benchRequest()})
	var out Triple
	okOut := e.Triple(&res, &out)
	val, okVal := tripleValue(e, &res)
	if !okOut || !okVal || val != out {
		b.Fatalf("Triple %v %+v, tripleValue %v %+v", okOut, out, okVal, val)
	}
}

// tripleValue is Engine.Triple returning the fields as a struct.
func tripleValue(e *Engine, res *Result) (t Triple, ok bool) {
	lt := e.tripleLimit(res)
	if lt == nil {
		return t, false
	}
	d := &res.Decision
	t.Limit, t.Remaining = lt.s, d.Remaining
	if e.cfg.resetDelta {
		t.Reset, t.ResetN = "", respond.CeilSeconds(d.ResetAfter)
		return t, true
	}
	now := res.now
	if now.IsZero() {
		now = e.cfg.clock.Now()
	}
	t.ResetN = respond.EpochSeconds(now, d.ResetAfter)
	t.Reset = respond.EpochString(t.ResetN, now.Unix())
	return t, true
}

// readTriple reads t's fields, as an adapter writing them does.
//
//go:noinline
func readTriple(t *Triple) int64 {
	return int64(len(t.Limit)) + t.Remaining + int64(len(t.Reset)) + t.ResetN
}
