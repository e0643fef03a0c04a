package benchmarks

import (
	"github.com/limitkit/limitkit/httplimit"

	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tollbooth "github.com/didip/tollbooth/v7"
	tblimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/gin-gonic/gin"
	"github.com/go-chi/httprate"
	"github.com/gofiber/fiber/v2"
	fiberlimiter "github.com/gofiber/fiber/v2/middleware/limiter"
	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"
	ulule "github.com/ulule/limiter/v3"
	ulugin "github.com/ulule/limiter/v3/drivers/middleware/gin"
	ulustd "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ulumem "github.com/ulule/limiter/v3/drivers/store/memory"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/fiberlimit"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// The middleware benchmarks serve GET /api1 from one client IP through
// each framework: without a limiter (the baseline), with limitkit's
// adapter (embedded store, key = peer IP, the default headers), and with
// the framework's or a peer's own limiter. The difference to the baseline
// is the middleware's overhead. BenchmarkMiddlewareCPU runs the rows of
// each framework round robin and reports the CPU time limitkit adds.

func kitLimiter(b *testing.B) *core.Limiter {
	st := must(memstore.New())
	b.Cleanup(func() { st.Close() })
	return must(core.NewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.Per(quota, quotaWin)}}))
}

// resetWriter is a ResponseWriter whose header map is cleared per request,
// so the loop does not allocate a recorder per op.
type resetWriter struct {
	h    http.Header
	code int
}

func (w *resetWriter) Header() http.Header         { return w.h }
func (w *resetWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *resetWriter) WriteHeader(c int)           { w.code = c }

// httpOp returns one GET /api1 through h as an operation to time, after
// checking that h serves it with 200; the operation reports whether h
// served it with 200 (not a 429: the quota never binds).
func httpOp(b *testing.B, h http.Handler) func() bool {
	b.Helper()
	return httpOpReq(b, h, httptest.NewRequest("GET", "/api1", nil))
}

// httpOpAPIKey is httpOp with an API key header (X-API-Key) on the
// request, for the rows keyed by it (apiKeyOpt).
func httpOpAPIKey(b *testing.B, h http.Handler) func() bool {
	b.Helper()
	r := httptest.NewRequest("GET", "/api1", nil)
	r.Header.Set("X-API-Key", "k-0123456789abcdef")
	return httpOpReq(b, h, r)
}

// apiKeyOpt keys a row's limiter by the X-API-Key header (a WithKey
// function, as a header-, API-key- or JWT-keyed deployment has).
func apiKeyOpt(b *testing.B) httplimit.Option {
	k, err := keyfuncs.APIKey("X-API-Key", "")
	if err != nil {
		b.Fatal(err)
	}
	return httplimit.WithKey(k)
}

func httpOpReq(b *testing.B, h http.Handler, r *http.Request) func() bool {
	b.Helper()
	r.RemoteAddr = "203.0.113.7:40000"
	w := &resetWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	if w.code != 0 && w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
	return func() bool {
		clear(w.h)
		w.code = 0
		r.Pattern = ""
		h.ServeHTTP(w, r)
		return w.code == 0 || w.code == http.StatusOK
	}
}

// fiberOp returns one GET /api1 through a fiber app using mw as an
// operation to time, after checking that the app serves it with 200; the
// operation reports whether the app served it with 200.
func fiberOp(b *testing.B, mw ...fiber.Handler) func() bool {
	b.Helper()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	for _, m := range mw {
		app.Use(m)
	}
	app.Get("/api1", func(c *fiber.Ctx) error { return c.SendString("ok") })
	h := app.Handler()
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI("/api1")
	fctx := new(fasthttp.RequestCtx)
	fctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40000}, nil)
	h(fctx)
	if c := fctx.Response.StatusCode(); c != http.StatusOK {
		b.Fatalf("status %d", c)
	}
	return func() bool {
		fctx.Response.Reset()
		h(fctx)
		return fctx.Response.StatusCode() == http.StatusOK
	}
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func newMux() *http.ServeMux { m := http.NewServeMux(); m.HandleFunc("GET /api1", ok); return m }

func ginEngine(mw ...gin.HandlerFunc) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(mw...)
	e.GET("/api1", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	return e
}

func echoServer(mw ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mw...)
	e.GET("/api1", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	return e
}

// mwRow builds one middleware row's operation, which reports whether the
// request was served with 200.
type mwRow struct {
	lib   string
	build func(b *testing.B) func() bool
}

// mwFrameworks lists, per framework, the bare framework ("none"),
// limitkit's adapter and the peers. net/http has two limitkit rows: the
// middleware around the whole mux ("limitkit", which asks the mux for the
// route pattern: a second route lookup) and around the route's handler
// ("limitkit-route", where the mux has set the pattern).
var mwFrameworks = []struct {
	name string
	rows []mwRow
}{
	{"nethttp", []mwRow{
		{"none", func(b *testing.B) func() bool { return httpOp(b, newMux()) }},
		{"limitkit", func(b *testing.B) func() bool { return httpOp(b, nethttp.New(kitLimiter(b))(newMux())) }},
		{"limitkit-route", func(b *testing.B) func() bool {
			m := http.NewServeMux()
			m.Handle("GET /api1", nethttp.New(kitLimiter(b))(http.HandlerFunc(ok)))
			return httpOp(b, m)
		}},
		{"limitkit-apikey", func(b *testing.B) func() bool {
			return httpOpAPIKey(b, nethttp.New(kitLimiter(b), apiKeyOpt(b))(newMux()))
		}},
		{"httprate", func(b *testing.B) func() bool { return httpOp(b, httprate.LimitByIP(quota, quotaWin)(newMux())) }},
		{"tollbooth", func(b *testing.B) func() bool {
			l := tollbooth.NewLimiter(perSecond, &tblimiter.ExpirableOptions{DefaultExpirationTTL: quotaWin}).SetBurst(quota)
			return httpOp(b, tollbooth.LimitHandler(l, newMux()))
		}},
		{"ulule", func(b *testing.B) func() bool {
			l := ulule.New(ulumem.NewStore(), ulule.Rate{Period: quotaWin, Limit: quota})
			return httpOp(b, ulustd.NewMiddleware(l).Handler(newMux()))
		}},
	}},
	{"gin", []mwRow{
		{"none", func(b *testing.B) func() bool { return httpOp(b, ginEngine()) }},
		{"limitkit", func(b *testing.B) func() bool { return httpOp(b, ginEngine(ginlimit.New(kitLimiter(b)))) }},
		{"limitkit-apikey", func(b *testing.B) func() bool {
			return httpOpAPIKey(b, ginEngine(ginlimit.New(kitLimiter(b), apiKeyOpt(b))))
		}},
		{"ulule", func(b *testing.B) func() bool {
			l := ulule.New(ulumem.NewStore(), ulule.Rate{Period: quotaWin, Limit: quota})
			return httpOp(b, ginEngine(ulugin.NewMiddleware(l)))
		}},
	}},
	{"echo", []mwRow{
		{"none", func(b *testing.B) func() bool { return httpOp(b, echoServer()) }},
		{"limitkit", func(b *testing.B) func() bool { return httpOp(b, echoServer(echolimit.New(kitLimiter(b)))) }},
		{"echo", func(b *testing.B) func() bool {
			st := echomw.NewRateLimiterMemoryStoreWithConfig(echomw.RateLimiterMemoryStoreConfig{Rate: rate.Limit(perSecond), Burst: quota, ExpiresIn: quotaWin})
			return httpOp(b, echoServer(echomw.RateLimiter(st)))
		}},
	}},
	{"fiber", []mwRow{
		{"none", func(b *testing.B) func() bool { return fiberOp(b) }},
		{"limitkit", func(b *testing.B) func() bool { return fiberOp(b, fiberlimit.New(kitLimiter(b))) }},
		{"fiber", func(b *testing.B) func() bool {
			return fiberOp(b, fiberlimiter.New(fiberlimiter.Config{Max: quota, Expiration: time.Hour, LimiterMiddleware: fiberlimiter.SlidingWindow{}}))
		}},
	}},
}

// BenchmarkMiddleware is one request per op through every row of every
// framework (ns/op, allocs/op).
func BenchmarkMiddleware(b *testing.B) {
	for _, fw := range mwFrameworks {
		for _, row := range fw.rows {
			b.Run(fw.name+"/lib="+row.lib, func(b *testing.B) {
				op := row.build(b)
				var denied int64
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if !op() {
						denied++
					}
				}
				mustAdmit(b, denied)
			})
		}
	}
}

// BenchmarkMiddlewareCPU runs each framework's rows round robin (see
// roundRobin) and reports every row's CPU and wall ns per request and
// the CPU time limitkit's adapter adds to the bare framework
// (added-cpu-ns:<framework>, the median of the per-round differences).
func BenchmarkMiddlewareCPU(b *testing.B) {
	for _, fw := range mwFrameworks {
		b.Run(fw.name, func(b *testing.B) {
			var rows []rrRow
			var denied int64
			for _, row := range fw.rows {
				op := row.build(b)
				rows = append(rows, rrRow{row.lib, func() {
					if !op() {
						denied++
					}
				}})
			}
			r := roundRobin(b, rows, 1000)
			mustAdmit(b, denied)
			r.report(b)
			for _, row := range fw.rows {
				if strings.HasPrefix(row.lib, "limitkit") {
					r.diff(b, row.lib, "none", "added-cpu-ns:"+row.lib)
				}
			}
		})
	}
}
