package benchmarks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tollbooth "github.com/didip/tollbooth/v7"
	tblimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/go-chi/httprate"
	echomw "github.com/labstack/echo/v4/middleware"
	sethvargo "github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ulumem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// Every limiter gets the same, never-binding quota, so that the benchmarks
// measure the bookkeeping of an admitted request, not the denial path.
const (
	quota     = 1_000_000_000
	quotaWin  = time.Hour
	keySpace  = 1 << 21 // bounded stores are sized above the 1M-key run
	fillKeys  = 1_000_000
	manyKeys  = 100_000
	perSecond = float64(quota) / 3600
)

// allowFunc decides one request for key and reports whether it was
// admitted.
type allowFunc func(key string) bool

// peer builds a fresh in-memory limiter; close releases it.
type peer struct {
	name string
	new  func(tb testing.TB) (allow allowFunc, close func())
}

var ctx = context.Background()

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// discardWriter is a ResponseWriter that keeps one header map, for
// libraries whose decision writes headers (httprate).
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// perKeyRate is the common hand-rolled limiter: x/time/rate in a map
// under one mutex (no eviction: it grows without bound).
type perKeyRate struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (p *perKeyRate) allow(key string) bool {
	p.mu.Lock()
	l, ok := p.m[key]
	if !ok {
		l = rate.NewLimiter(rate.Limit(perSecond), quota)
		p.m[key] = l
	}
	p.mu.Unlock()
	return l.Allow()
}

var memPeers = []peer{
	{"limitkit", func(tb testing.TB) (allowFunc, func()) {
		st := must(memstore.New(memstore.WithMaxKeys(keySpace)))
		l := must(core.NewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(quota, quotaWin)}}))
		return func(k string) bool { d, _ := l.Allow(ctx, k); return d.Allowed }, func() { st.Close() }
	}},
	{"limitkit-sliding", func(tb testing.TB) (allowFunc, func()) {
		st := must(memstore.New(memstore.WithMaxKeys(keySpace)))
		l := must(core.NewLimiter(st, core.Policy{Name: "bench", Algorithm: core.SlidingWindowCounter, Limits: []core.Limit{core.Per(quota, quotaWin)}}))
		return func(k string) bool { d, _ := l.Allow(ctx, k); return d.Allowed }, func() { st.Close() }
	}},
	{"ulule", func(tb testing.TB) (allowFunc, func()) {
		l := ulule.New(ulumem.NewStore(), ulule.Rate{Period: quotaWin, Limit: quota})
		return func(k string) bool { c, err := l.Get(ctx, k); return err == nil && !c.Reached }, func() {}
	}},
	{"sethvargo", func(tb testing.TB) (allowFunc, func()) {
		st := must(sethvargo.New(&sethvargo.Config{Tokens: quota, Interval: quotaWin}))
		return func(k string) bool { _, _, _, ok, _ := st.Take(ctx, k); return ok }, func() { st.Close(ctx) }
	}},
	{"httprate", func(tb testing.TB) (allowFunc, func()) {
		// No header names: the decision alone, like the other rows (and a
		// shared writer stays safe under RunParallel).
		l := httprate.NewRateLimiter(quota, quotaWin, httprate.WithResponseHeaders(httprate.ResponseHeaders{}))
		w := &discardWriter{h: http.Header{}}
		r := httptest.NewRequest("GET", "/", nil)
		return func(k string) bool { return !l.OnLimit(w, r, k) }, func() {}
	}},
	{"throttled", func(tb testing.TB) (allowFunc, func()) {
		st := must(throttledmem.NewCtx(keySpace))
		l := must(throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerHour(quota), MaxBurst: quota - 1}))
		// an error is throttled giving up after its compare-and-swap
		// attempts under contention (parallel rows): its behaviour, not a
		// quota denial; only limited counts as one
		return func(k string) bool { limited, _, _ := l.RateLimitCtx(ctx, k, 1); return !limited }, func() {}
	}},
	{"tollbooth", func(tb testing.TB) (allowFunc, func()) {
		l := tollbooth.NewLimiter(perSecond, &tblimiter.ExpirableOptions{DefaultExpirationTTL: quotaWin}).SetBurst(quota)
		return func(k string) bool { return !l.LimitReached(k) }, func() {}
	}},
	{"echo", func(tb testing.TB) (allowFunc, func()) {
		st := echomw.NewRateLimiterMemoryStoreWithConfig(echomw.RateLimiterMemoryStoreConfig{Rate: rate.Limit(perSecond), Burst: quota, ExpiresIn: quotaWin})
		return func(k string) bool { ok, _ := st.Allow(k); return ok }, func() {}
	}},
	{"x-time-rate-map", func(tb testing.TB) (allowFunc, func()) {
		p := &perKeyRate{m: map[string]*rate.Limiter{}}
		return p.allow, func() {}
	}},
}

// checkAdmits fails the benchmark if a limiter denies under the
// never-binding quota (a misconfigured peer would measure the wrong path).
func checkAdmits(b *testing.B, allow allowFunc) {
	b.Helper()
	for i := range 3 {
		if !allow("probe-" + strconv.Itoa(i)) {
			b.Fatal("limiter denied under a never-binding quota: misconfigured")
		}
	}
}

// mustAdmit fails the benchmark when a timed loop saw denials: every
// decision is under the never-binding quota, so a denial means the peer is
// misconfigured and the benchmark measured the denial path.
func mustAdmit(b *testing.B, denied int64) {
	b.Helper()
	if denied > 0 {
		b.Fatalf("%d decisions denied under a never-binding quota: misconfigured (the denial path was measured)", denied)
	}
}

// parallelDenials counts the denials of a RunParallel loop: each goroutine
// counts its own and adds them once when it ends.
type parallelDenials struct{ n atomic.Int64 }

func (d *parallelDenials) add(n int64) { d.n.Add(n) }

func (d *parallelDenials) check(b *testing.B) { b.Helper(); mustAdmit(b, d.n.Load()) }

// BenchmarkHotKey: every request for the same key (one abusive client).
func BenchmarkHotKey(b *testing.B) {
	for _, p := range memPeers {
		b.Run("serial/lib="+p.name, func(b *testing.B) {
			allow, done := p.new(b)
			defer done()
			checkAdmits(b, allow)
			var denied int64
			b.ReportAllocs()
			for b.Loop() {
				if !allow("user:42") {
					denied++
				}
			}
			mustAdmit(b, denied)
		})
	}
	for _, p := range memPeers {
		b.Run("parallel/lib="+p.name, func(b *testing.B) {
			allow, done := p.new(b)
			defer done()
			checkAdmits(b, allow)
			var denied parallelDenials
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var n int64
				for pb.Next() {
					if !allow("user:42") {
						n++
					}
				}
				denied.add(n)
			})
			denied.check(b)
		})
	}
}

// BenchmarkManyKeys: parallel requests spread over 100k known clients
// (the steady state of a busy API).
func BenchmarkManyKeys(b *testing.B) {
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	for _, p := range memPeers {
		b.Run("parallel/lib="+p.name, func(b *testing.B) {
			allow, done := p.new(b)
			defer done()
			for _, k := range keys {
				if !allow(k) {
					b.Fatalf("%s denied %s under a never-binding quota: misconfigured", p.name, k)
				}
			}
			var seed atomic.Uint64
			var denied parallelDenials
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// A per-goroutine xorshift walk over the keys.
				x := seed.Add(0x9E3779B97F4A7C15) | 1
				var n int64
				for pb.Next() {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					if !allow(keys[x%manyKeys]) {
						n++
					}
				}
				denied.add(n)
			})
			denied.check(b)
		})
	}
}

// BenchmarkDistinctKeys fills a fresh limiter with one million distinct
// keys per op (each key seen once: the insert path, as under a scan from
// many IPs) and reports ns/key and the heap the limiter retains per key
// after a GC (B/key). Keys are built on the fly, so a limiter that keeps
// the key string pays for it and one that hashes it does not.
func BenchmarkDistinctKeys(b *testing.B) {
	for _, p := range memPeers {
		b.Run("1M/lib="+p.name, func(b *testing.B) {
			var perKey float64
			var buf []byte
			var denied int64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				allow, done := p.new(b)
				b.StartTimer()
				for i := range fillKeys {
					buf = strconv.AppendInt(append(buf[:0], "ip:10."...), int64(i), 10)
					if !allow(string(buf)) {
						denied++
					}
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / fillKeys
				runtime.KeepAlive(allow)
				done()
				b.StartTimer()
			}
			mustAdmit(b, denied)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/fillKeys, "ns/key")
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// BenchmarkHotKeyCPU is BenchmarkHotKey/serial with every library in one
// loop, round robin (see roundRobin): each library's CPU and wall ns per
// decision (medians over the rounds), and limitkit's CPU time over
// go-limiter's (x:limitkit/sethvargo, the median of the per-round ratios).
func BenchmarkHotKeyCPU(b *testing.B) {
	var rows []rrRow
	var denied int64
	for _, p := range memPeers {
		allow, done := p.new(b)
		defer done()
		checkAdmits(b, allow)
		rows = append(rows, rrRow{p.name, func() {
			if !allow("user:42") {
				denied++
			}
		}})
	}
	r := roundRobin(b, rows, 2000)
	mustAdmit(b, denied)
	r.report(b)
	r.ratio(b, "limitkit", "sethvargo", "x:limitkit/sethvargo")
}
