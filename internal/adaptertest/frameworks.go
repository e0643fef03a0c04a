package adaptertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/fiberlimit"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/nethttp"
)

func denyBody(reason fmt.Stringer, policy string, retry int64) string {
	return "denied:" + reason.String() + ":" + policy + ":" + strconv.FormatInt(retry, 10)
}

// All returns the four harnesses.
func All() []Harness { return []Harness{NetHTTP(), Gin(), Echo(), Fiber()} }

var param = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

func colonScope(method, path string) string {
	if method == "" {
		return path
	}
	return method + " " + path
}

// serveHTTP serves req with h through an httptest recorder. The
// request's context carries its cancel function (the client going away,
// see ActGone); a panic is recovered into a Response (see Panicked).
func serveHTTP(h http.Handler, req Request) (resp Response) {
	defer recovered(&resp)
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	r := httptest.NewRequest(req.Method, req.Target, body)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r = r.WithContext(context.WithValue(ctx, cancelKey{}, cancel))
	r.RemoteAddr = req.Peer
	for k, v := range req.Header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return Response{Status: w.Code, Header: w.Result().Header, Body: w.Body.String()}
}

// NetHTTP is the net/http harness: a ServeMux with "METHOD /path/{param}"
// patterns, the global middleware wrapping the mux.
func NetHTTP() Harness {
	return Harness{
		Name: "nethttp",
		Build: func(app App) (Client, error) {
			mux := http.NewServeMux()
			for _, rt := range app.Routes {
				var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if httpAct(r) {
						return
					}
					if r.Header.Get(ReplyIdentity) != "" {
						_, _ = w.Write([]byte(identityReply(nethttp.Identity(r))))
						return
					}
					if f := r.Header.Get(ReplyForm); f != "" {
						_, _ = w.Write([]byte("form:" + r.PostFormValue(f)))
						return
					}
					if code := replyStatus(r.Header.Get(ReplyStatus)); code != 0 {
						w.WriteHeader(code)
						return
					}
					_, _ = w.Write([]byte("ok"))
				})
				if rt.Mw != nil {
					mw, err := nethttp.NewMiddleware(rt.Mw.Limiter, rt.Mw.Opts...)
					if err != nil {
						return nil, err
					}
					h = mw(h)
				}
				pattern := param.ReplaceAllString(rt.Path, "{$1}")
				switch rt.Method {
				case AnyMethod:
				case GetHead:
					pattern = "GET " + pattern
				default:
					pattern = rt.Method + " " + pattern
				}
				mux.Handle(pattern, h)
			}
			var root http.Handler = mux
			if app.Global != nil {
				mw, err := nethttp.NewMiddleware(app.Global.Limiter, app.Global.Opts...)
				if err != nil {
					return nil, err
				}
				root = mw(mux)
			}
			return func(req Request) Response { return serveHTTP(root, req) }, nil
		},
		Scope: func(m, p string) string { return colonScope(m, param.ReplaceAllString(p, "{$1}")) },
		CustomDeny: func() httplimit.Option {
			return nethttp.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, rej httplimit.Rejection) {
				w.Header().Set("X-Denied", rej.Reason.String())
				w.WriteHeader(http.StatusTeapot)
				_, _ = w.Write([]byte(denyBody(rej.Reason, rej.Decision.Policy, rej.RetryAfter)))
			})
		},
	}
}

// Gin is the gin harness.
func Gin() Harness {
	gin.SetMode(gin.ReleaseMode)
	return Harness{
		Name: "gin",
		Build: func(app App) (Client, error) {
			r := gin.New()
			if app.Global != nil {
				mw, err := ginlimit.NewMiddleware(app.Global.Limiter, app.Global.Opts...)
				if err != nil {
					return nil, err
				}
				r.Use(mw)
			}
			for _, rt := range app.Routes {
				var hs []gin.HandlerFunc
				if rt.Mw != nil {
					mw, err := ginlimit.NewMiddleware(rt.Mw.Limiter, rt.Mw.Opts...)
					if err != nil {
						return nil, err
					}
					hs = append(hs, mw)
				}
				hs = append(hs, func(c *gin.Context) {
					if httpAct(c.Request) {
						return
					}
					if c.GetHeader(ReplyIdentity) != "" {
						c.String(http.StatusOK, identityReply(ginlimit.Identity(c)))
						return
					}
					if f := c.GetHeader(ReplyForm); f != "" {
						c.String(http.StatusOK, "form:"+c.PostForm(f))
						return
					}
					if code := replyStatus(c.GetHeader(ReplyStatus)); code != 0 {
						c.Status(code)
						return
					}
					c.String(http.StatusOK, "ok")
				})
				switch rt.Method {
				case AnyMethod:
					r.Any(rt.Path, hs...)
				case GetHead:
					r.GET(rt.Path, hs...)
					r.HEAD(rt.Path, hs...)
				default:
					r.Handle(rt.Method, rt.Path, hs...)
				}
			}
			return func(req Request) Response { return serveHTTP(r, req) }, nil
		},
		Scope: colonScope,
		CustomDeny: func() httplimit.Option {
			return ginlimit.WithDenyHandler(func(c *gin.Context, rej httplimit.Rejection) {
				c.Header("X-Denied", rej.Reason.String())
				c.String(http.StatusTeapot, denyBody(rej.Reason, rej.Decision.Policy, rej.RetryAfter))
			})
		},
	}
}

// Echo is the echo harness.
func Echo() Harness {
	return Harness{
		Name: "echo",
		Build: func(app App) (Client, error) {
			e := echo.New()
			if app.Global != nil {
				mw, err := echolimit.NewMiddleware(app.Global.Limiter, app.Global.Opts...)
				if err != nil {
					return nil, err
				}
				e.Use(mw)
			}
			for _, rt := range app.Routes {
				var mws []echo.MiddlewareFunc
				if rt.Mw != nil {
					mw, err := echolimit.NewMiddleware(rt.Mw.Limiter, rt.Mw.Opts...)
					if err != nil {
						return nil, err
					}
					mws = append(mws, mw)
				}
				ok := func(c echo.Context) error {
					if httpAct(c.Request()) {
						return nil
					}
					if c.Request().Header.Get(ReplyIdentity) != "" {
						return c.String(http.StatusOK, identityReply(echolimit.Identity(c)))
					}
					if f := c.Request().Header.Get(ReplyForm); f != "" {
						return c.String(http.StatusOK, "form:"+c.FormValue(f))
					}
					if code := replyStatus(c.Request().Header.Get(ReplyStatus)); code >= 400 {
						return echo.NewHTTPError(code) // written by echo's error handler
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
			return echolimit.WithDenyHandler(func(c echo.Context, rej httplimit.Rejection) error {
				c.Response().Header().Set("X-Denied", rej.Reason.String())
				return c.String(http.StatusTeapot, denyBody(rej.Reason, rej.Decision.Policy, rej.RetryAfter))
			})
		},
	}
}

// Fiber is the fiber v2 harness. Requests go straight to the app's
// fasthttp handler on a RequestCtx whose remote address is the peer.
func Fiber() Harness {
	return Harness{
		Name: "fiber",
		Build: func(app App) (Client, error) {
			a := fiber.New(fiber.Config{DisableStartupMessage: true})
			if app.Global != nil {
				mw, err := fiberlimit.NewMiddleware(app.Global.Limiter, app.Global.Opts...)
				if err != nil {
					return nil, err
				}
				a.Use(mw)
			}
			for _, rt := range app.Routes {
				var hs []fiber.Handler
				if rt.Mw != nil {
					mw, err := fiberlimit.NewMiddleware(rt.Mw.Limiter, rt.Mw.Opts...)
					if err != nil {
						return nil, err
					}
					hs = append(hs, mw)
				}
				hs = append(hs, func(c *fiber.Ctx) error {
					if fiberAct(c) {
						return nil
					}
					if c.Get(ReplyIdentity) != "" {
						return c.SendString(identityReply(fiberlimit.Identity(c)))
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
					a.All(rt.Path, hs...)
				case GetHead:
					a.Get(rt.Path, hs...)
				default:
					a.Add(rt.Method, rt.Path, hs...)
				}
			}
			h := a.Handler()
			return func(req Request) Response { return serveFast(h, req) }, nil
		},
		Scope: colonScope,
		CustomDeny: func() httplimit.Option {
			return fiberlimit.WithDenyHandler(func(c *fiber.Ctx, rej httplimit.Rejection) error {
				c.Set("X-Denied", rej.Reason.String())
				return c.Status(http.StatusTeapot).SendString(denyBody(rej.Reason, rej.Decision.Policy, rej.RetryAfter))
			})
		},
	}
}

// FastCtx prepares ctx for req as fasthttp's server would.
func FastCtx(ctx *fasthttp.RequestCtx, req Request) {
	var fr fasthttp.Request
	fr.Header.SetMethod(req.Method)
	fr.SetRequestURI(req.Target)
	fr.Header.SetHost("example.com")
	for k, v := range req.Header {
		fr.Header.Set(k, v)
	}
	if req.Body != "" {
		fr.SetBodyString(req.Body)
	}
	var addr net.Addr
	if ap, err := netip.ParseAddrPort(req.Peer); err == nil {
		addr = net.TCPAddrFromAddrPort(ap)
	} else {
		addr = &net.UnixAddr{Name: req.Peer, Net: "unix"}
	}
	ctx.Init(&fr, addr, nil)
}

func serveFast(h fasthttp.RequestHandler, req Request) (resp Response) {
	defer recovered(&resp)
	var ctx fasthttp.RequestCtx
	FastCtx(&ctx, req)
	h(&ctx)
	hdr := http.Header{}
	for k, v := range ctx.Response.Header.All() {
		hdr.Add(string(k), string(v))
	}
	if ct := ctx.Response.Header.ContentType(); len(ct) > 0 {
		hdr.Set("Content-Type", string(ct))
	}
	return Response{Status: ctx.Response.StatusCode(), Header: hdr, Body: strings.Clone(string(ctx.Response.Body()))}
}
