package httplimit_test

import (
	"fmt"
	"net/http"
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
				want := fmt.Sprintf("%s: %s.WithDenyHandler is an option of package %s, given to a %s middleware: use the option of package %s",
					adapter, owner, owner, adapter, adapter)
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
