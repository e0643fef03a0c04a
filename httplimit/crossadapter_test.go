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

// TestDenyHandlerOfAnotherAdapter guards the cross-adapter mistake:
// nethttp.NewMiddleware(l, ginlimit.WithDenyHandler(h)) compiled and
// silently sent the default 429. Every adapter must reject every other
// adapter's WithDenyHandler at construction, naming both, and accept its
// own.
func TestDenyHandlerOfAnotherAdapter(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	handlers := map[string]httplimit.Option{
		"nethttp":    nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, nethttp.Rejection) {}),
		"ginlimit":   ginlimit.WithDenyHandler(func(*gin.Context, ginlimit.Rejection) {}),
		"echolimit":  echolimit.WithDenyHandler(func(echo.Context, echolimit.Rejection) error { return nil }),
		"fiberlimit": fiberlimit.WithDenyHandler(func(*fiber.Ctx, fiberlimit.Rejection) error { return nil }),
	}
	build := map[string]func(...httplimit.Option) error{
		"nethttp":    func(o ...httplimit.Option) error { _, err := nethttp.NewMiddleware(l, o...); return err },
		"ginlimit":   func(o ...httplimit.Option) error { _, err := ginlimit.NewMiddleware(l, o...); return err },
		"echolimit":  func(o ...httplimit.Option) error { _, err := echolimit.NewMiddleware(l, o...); return err },
		"fiberlimit": func(o ...httplimit.Option) error { _, err := fiberlimit.NewMiddleware(l, o...); return err },
		"grpclimit":  func(o ...httplimit.Option) error { _, err := grpclimit.New(l, o...); return err },
	}
	for adapter, b := range build {
		for owner, opt := range handlers {
			t.Run(owner+" to "+adapter, func(t *testing.T) {
				err := b(httplimit.WithScope("x"), opt)
				if owner == adapter {
					if err != nil {
						t.Fatalf("own deny handler refused: %v", err)
					}
					return
				}
				want := fmt.Sprintf("%s: %s.WithDenyHandler is an option of package %s, given to a %s middleware: use %s.WithDenyHandler",
					adapter, owner, owner, adapter, adapter)
				if adapter == "grpclimit" {
					want = fmt.Sprintf("grpclimit: %s.WithDenyHandler is an option of package %s, given to a grpclimit middleware: package grpclimit has no equivalent (grpclimit answers a denial with a status: codes.ResourceExhausted",
						owner, owner)
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want %q", err, want)
				}
			})
		}
	}
}

// TestRouteOfAnotherAdapter: nethttp.WithRoute, an adapter option since
// the engine moved to httplimit, is refused by every other adapter at
// construction (gin, echo and fiber know their routes; a resolver given
// to them would be silently ignored), and a nil resolver is refused by
// nethttp itself.
func TestRouteOfAnotherAdapter(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	route := nethttp.WithRoute(func(*http.Request) string { return "/x" })
	_, err := nethttp.NewMiddleware(l, route)
	if err != nil {
		t.Fatalf("nethttp refused its own WithRoute: %v", err)
	}
	if _, err := nethttp.NewMiddleware(l, nethttp.WithRoute(nil)); err == nil || !strings.Contains(err.Error(), "nethttp.WithRoute(nil)") {
		t.Fatalf("WithRoute(nil): err = %v", err)
	}
	for adapter, b := range map[string]func() error{
		"ginlimit":   func() error { _, err := ginlimit.NewMiddleware(l, route); return err },
		"echolimit":  func() error { _, err := echolimit.NewMiddleware(l, route); return err },
		"fiberlimit": func() error { _, err := fiberlimit.NewMiddleware(l, route); return err },
		"grpclimit":  func() error { _, err := grpclimit.New(l, route); return err },
	} {
		want := adapter + ": nethttp.WithRoute is an option of package nethttp, given to a " + adapter + " middleware"
		if err := b(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", adapter, err, want)
		}
	}
}

// TestGRPCRefusesHTTPResponseOptions: grpclimit writes no HTTP response,
// so the options that only shape one — given directly or through an HTTP
// adapter's re-export — are construction errors naming the option and
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
		{ginlimit.WithDenyBody("text/plain", []byte("slow down")), "WithDenyBody"},
	} {
		_, err := grpclimit.New(l, tc.opt)
		want := "grpclimit: httplimit." + tc.name + " shapes an HTTP response, which a grpclimit middleware does not write: remove it (grpclimit answers a denial with a status: codes.ResourceExhausted"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
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
	deny := func(w http.ResponseWriter, _ *http.Request, _ nethttp.Rejection) { w.WriteHeader(http.StatusTeapot) }
	_, err := nethttp.NewMiddleware(l, httplimit.AdapterOption("nethttp", "WithDenyHandlr", nethttp.DenyHandler(deny)))
	if want := "nethttp: nethttp.WithDenyHandlr is not an option of package nethttp (it reads WithDenyHandler, WithRoute)"; err == nil || err.Error() != want {
		t.Errorf("misspelt name: err = %v, want %q", err, want)
	}
	_, err = ginlimit.NewMiddleware(l, httplimit.AdapterOption("ginlimit", "WithDenyHandler", func(*gin.Context) {}))
	if want := "ginlimit: ginlimit.WithDenyHandler: a func(*gin.Context) given, want a ginlimit.DenyHandler"; err == nil || err.Error() != want {
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
