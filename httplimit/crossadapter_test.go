package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/fiberlimit"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/nethttp"
)

// grpcDenials is how grpclimit's errors say it denies, in place of a deny
// handler it has no equivalent of.
const grpcDenials = "grpclimit answers a denial with a status: codes.ResourceExhausted with RetryInfo, " +
	"QuotaFailure and ErrorInfo details and the retry-after and grpc-retry-pushback-ms trailers " +
	"(see grpclimit.Interceptor); wrap the interceptor to change it"

// TestOptionOfAnotherAdapter guards the cross-adapter mistake:
// nethttp.NewMiddleware(l, ginlimit.WithDenyHandler(h)) compiled and
// silently sent the default 429. Every adapter must reject every other
// adapter's own option at construction, naming both and what to use
// instead — the receiving package's equivalent when it has one
// (httplimit.WithOutcome for grpclimit.WithOutcome, not "no equivalent"),
// "no equivalent" only when it has none, with how grpclimit denies only
// in place of a deny handler — and accept its own.
func TestOptionOfAnotherAdapter(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	build := map[string]func(...httplimit.Option) error{
		"nethttp":    func(o ...httplimit.Option) error { _, err := nethttp.NewMiddleware(l, o...); return err },
		"ginlimit":   func(o ...httplimit.Option) error { _, err := ginlimit.NewMiddleware(l, o...); return err },
		"echolimit":  func(o ...httplimit.Option) error { _, err := echolimit.NewMiddleware(l, o...); return err },
		"fiberlimit": func(o ...httplimit.Option) error { _, err := fiberlimit.NewMiddleware(l, o...); return err },
		"grpclimit":  func(o ...httplimit.Option) error { _, err := grpclimit.New(l, o...); return err },
	}
	article := map[string]string{"nethttp": "a", "ginlimit": "a", "echolimit": "an", "fiberlimit": "a", "grpclimit": "a"}
	denyHints := map[string]string{ // what each adapter answers to another's WithDenyHandler
		"nethttp":    "use nethttp.WithDenyHandler",
		"ginlimit":   "use ginlimit.WithDenyHandler",
		"echolimit":  "use echolimit.WithDenyHandler",
		"fiberlimit": "use fiberlimit.WithDenyHandler",
		"grpclimit":  "package grpclimit has no equivalent (" + grpcDenials + ")",
	}
	for _, tc := range []struct {
		name  string // as the user wrote it
		opt   httplimit.Option
		hints map[string]string // by receiving adapter; the owner is absent
	}{
		{"nethttp.WithDenyHandler", nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, httplimit.Rejection) {}), denyHints},
		{"ginlimit.WithDenyHandler", ginlimit.WithDenyHandler(func(*gin.Context, httplimit.Rejection) {}), denyHints},
		{"echolimit.WithDenyHandler", echolimit.WithDenyHandler(func(echo.Context, httplimit.Rejection) error { return nil }), denyHints},
		{"fiberlimit.WithDenyHandler", fiberlimit.WithDenyHandler(func(*fiber.Ctx, httplimit.Rejection) error { return nil }), denyHints},
		{"nethttp.WithRoute", nethttp.WithRoute(func(*http.Request) string { return "/x" }), map[string]string{
			"ginlimit":   "package ginlimit has no equivalent",
			"echolimit":  "package echolimit has no equivalent",
			"fiberlimit": "package fiberlimit has no equivalent",
			"grpclimit":  "package grpclimit has no equivalent",
		}},
		{"grpclimit.WithOutcome", grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeNotOK}), map[string]string{
			"nethttp":    "use httplimit.WithOutcome, whose Count sees HTTP statuses",
			"ginlimit":   "use httplimit.WithOutcome, whose Count sees HTTP statuses",
			"echolimit":  "use httplimit.WithOutcome, whose Count sees HTTP statuses",
			"fiberlimit": "use httplimit.WithOutcome, whose Count sees HTTP statuses",
		}},
	} {
		owner, _, _ := strings.Cut(tc.name, ".")
		for adapter, b := range build {
			t.Run(tc.name+" to "+adapter, func(t *testing.T) {
				err := b(httplimit.WithScope("x"), tc.opt)
				if adapter == owner {
					if err != nil {
						t.Fatalf("own option refused: %v", err)
					}
					return
				}
				want := fmt.Sprintf("%s: %s is an option of package %s, given to %s %s middleware: %s",
					adapter, tc.name, owner, article[adapter], adapter, tc.hints[adapter])
				if err == nil || err.Error() != want {
					t.Fatalf("err = %v\nwant  %s", err, want)
				}
			})
		}
	}
}

// TestRouteOfAnotherAdapter: nethttp.WithRoute, an adapter option since
// the engine moved to httplimit, is refused by every other adapter
// (TestOptionOfAnotherAdapter), and a nil resolver is refused by nethttp
// itself.
func TestRouteOfAnotherAdapter(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	if _, err := nethttp.NewMiddleware(l, nethttp.WithRoute(nil)); err == nil || !strings.Contains(err.Error(), "nethttp.WithRoute(nil)") {
		t.Fatalf("WithRoute(nil): err = %v", err)
	}
}

// TestGRPCRefusesHTTPResponseOptions: grpclimit writes no HTTP response,
// so the options that only shape one are construction errors naming the option and
// how grpclimit denies instead; the HTTP adapters keep accepting them.
func TestGRPCRefusesHTTPResponseOptions(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	for _, tc := range []struct {
		opt  httplimit.Option
		name string
	}{
		{httplimit.WithDenyStatus(418), "WithDenyStatus"},
		{httplimit.WithDenyBody("text/plain", []byte("slow down")), "WithDenyBody"},
	} {
		_, err := grpclimit.New(l, tc.opt)
		want := "grpclimit: httplimit." + tc.name + " shapes an HTTP response, which a grpclimit middleware does not write: remove it (" + grpcDenials + ")"
		if err == nil || err.Error() != want {
			t.Errorf("grpclimit.New with %s: err = %v, want %q", tc.name, err, want)
		}
		if _, err := nethttp.NewMiddleware(l, tc.opt); err != nil {
			t.Errorf("nethttp refused %s: %v", tc.name, err)
		}
		if _, err := fiberlimit.NewMiddleware(l, tc.opt); err != nil {
			t.Errorf("fiberlimit refused %s: %v", tc.name, err)
		}
	}
}

// TestAdapterOptionNameAndType: an AdapterOption of the right adapter
// with a misspelt name, or with a value of another type than the one the
// adapter reads, is a construction error (it was silently ignored); a
// function literal of the deny handler's signature is honoured like the
// typed handler.
func TestAdapterOptionNameAndType(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	deny := func(w http.ResponseWriter, _ *http.Request, _ httplimit.Rejection) { w.WriteHeader(http.StatusTeapot) }
	_, err := nethttp.NewMiddleware(l, httplimit.AdapterOption("nethttp", "WithDenyHandlr", deny))
	if want := "nethttp: nethttp.WithDenyHandlr is not an option of package nethttp (it reads WithDenyHandler, WithRoute)"; err == nil || err.Error() != want {
		t.Errorf("misspelt name: err = %v, want %q", err, want)
	}
	_, err = ginlimit.NewMiddleware(l, httplimit.AdapterOption("ginlimit", "WithDenyHandler", func(*gin.Context) {}))
	if want := "ginlimit: ginlimit.WithDenyHandler: a func(*gin.Context) given, want a func(*gin.Context, httplimit.Rejection)"; err == nil || err.Error() != want {
		t.Errorf("wrong type: err = %v, want %q", err, want)
	}
	mw, err := nethttp.NewMiddleware(l, httplimit.WithScope("x"), httplimit.AdapterOption("nethttp", "WithDenyHandler", deny))
	if err != nil {
		t.Fatalf("a function literal of the handler's signature: %v", err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	codes := []int{}
	for range 2 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "203.0.113.7:1"
		h.ServeHTTP(rec, req)
		codes = append(codes, rec.Code)
	}
	if codes[0] != http.StatusOK || codes[1] != http.StatusTeapot {
		t.Fatalf("statuses %v, want [200 418] (the literal deny handler)", codes)
	}
}
