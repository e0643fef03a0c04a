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
