package adaptertest

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/limitkit/limitkit/echo5limit"
	"github.com/limitkit/limitkit/httplimit"
)

// Echo5 is the echo v5 harness: the Echo harness's routes on echo v5.
func Echo5() Harness {
	return Harness{
		Name: "echo5",
		Build: func(app App) (Client, error) {
			e := echo.New()
			if app.Global != nil {
				mw, err := echo5limit.NewMiddleware(app.Global.Limiter, app.Global.Opts...)
				if err != nil {
					return nil, err
				}
				e.Use(mw)
			}
			for _, rt := range app.Routes {
				var mws []echo.MiddlewareFunc
				if rt.Mw != nil {
					mw, err := echo5limit.NewMiddleware(rt.Mw.Limiter, rt.Mw.Opts...)
					if err != nil {
						return nil, err
					}
					mws = append(mws, mw)
				}
				ok := func(c *echo.Context) error {
					if httpAct(c.Request()) {
						return nil
					}
					if c.Request().Header.Get(ReplyIdentity) != "" {
						return c.String(http.StatusOK, identityReply(echo5limit.Identity(c)))
					}
					if f := c.Request().Header.Get(ReplyForm); f != "" {
						return c.String(http.StatusOK, "form:"+c.FormValue(f))
					}
					if code := replyStatus(c.Request().Header.Get(ReplyStatus)); code >= 400 {
						return echo.NewHTTPError(code, "") // written by echo's error handler
					} else if code != 0 {
						return c.NoContent(code)
					}
					return c.String(http.StatusOK, "ok")
				}
				switch rt.Method {
				case AnyMethod:
					e.Any(rt.Path, ok, mws...)
				case GetHead:
					e.GET(rt.Path, ok, mws...)
					e.HEAD(rt.Path, ok, mws...)
				default:
					e.Add(rt.Method, rt.Path, ok, mws...)
				}
			}
			return func(req Request) Response { return serveHTTP(e, req) }, nil
		},
		Scope: colonScope,
		CustomDeny: func() httplimit.Option {
			return echo5limit.WithDenyHandler(func(c *echo.Context, rej httplimit.Rejection) error {
				c.Response().Header().Set("X-Denied", rej.Reason.String())
				return c.String(http.StatusTeapot, denyBody(rej.Reason, rej.Decision.Policy, rej.RetryAfter))
			})
		},
	}
}
