package adaptertest

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v3"

	"github.com/limitkit/limitkit/fiber3limit"
	"github.com/limitkit/limitkit/httplimit"
)

// fiber3Act is act for a fiber v3 handler: the client going away is a
// context that has ended (fasthttp reports no disconnect to handlers).
func fiber3Act(c fiber.Ctx) bool {
	return act(c.Get(ReplyAction), func() {
		ctx, cancel := context.WithCancel(c.Context())
		cancel()
		c.SetContext(ctx)
	})
}

// Fiber3 is the fiber v3 harness. Requests go straight to the app's
// fasthttp handler on a RequestCtx whose remote address is the peer.
func Fiber3() Harness {
	return Harness{
		Name: "fiber3",
		Build: func(app App) (Client, error) {
			a := fiber.New()
			if app.Global != nil {
				mw, err := fiber3limit.NewMiddleware(app.Global.Limiter, app.Global.Opts...)
				if err != nil {
					return nil, err
				}
				a.Use(mw)
			}
			for _, rt := range app.Routes {
				var hs []any
				if rt.Mw != nil {
					mw, err := fiber3limit.NewMiddleware(rt.Mw.Limiter, rt.Mw.Opts...)
					if err != nil {
						return nil, err
					}
					hs = append(hs, mw)
				}
				hs = append(hs, func(c fiber.Ctx) error {
					if fiber3Act(c) {
						return nil
					}
					if c.Get(ReplyIdentity) != "" {
						return c.SendString(identityReply(fiber3limit.Identity(c)))
					}
					if f := c.Get(ReplyForm); f != "" {
						return c.SendString("form:" + c.FormValue(f))
					}
					if code := replyStatus(c.Get(ReplyStatus)); code >= 400 {
						return fiber.NewError(code) // written by fiber's error handler
					} else if code != 0 {
						return c.SendStatus(code)
					}
					return c.SendString("ok")
				})
				switch rt.Method {
				case AnyMethod:
					a.All(rt.Path, hs[0], hs[1:]...)
				case GetHead:
					a.Get(rt.Path, hs[0], hs[1:]...)
				default:
					a.Add([]string{rt.Method}, rt.Path, hs[0], hs[1:]...)
				}
			}
			h := a.Handler()
			return func(req Request) Response { return serveFast(h, req) }, nil
		},
		Scope: colonScope,
		CustomDeny: func() httplimit.Option {
			return fiber3limit.WithDenyHandler(func(c fiber.Ctx, rej httplimit.Rejection) error {
				c.Set("X-Denied", rej.Reason.String())
				return c.Status(http.StatusTeapot).SendString(denyBody(rej.Reason, rej.Decision.Policy, rej.RetryAfter))
			})
		},
	}
}
