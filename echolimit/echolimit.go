package echolimit

import (
	"net/http"
	"reflect"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// denyHandler is what [WithDenyHandler] takes.
type denyHandler = func(c echo.Context, rej httplimit.Rejection) error

// WithDenyHandler replaces the whole denial (status, body) with h, which
// writes a denial in place of the default one: the rate-limit headers (and
// Retry-After) are already set; h writes the status and body. Its error is
// returned to echo (and its HTTPErrorHandler); the next handler is not
// called.
// It applies to quota, no-key and store-unavailable denials alike (rej.Reason tells them
// apart). h must not be nil. Only this package's middleware accepts it:
// another adapter given it fails at construction, naming both packages.
func WithDenyHandler(h func(c echo.Context, rej httplimit.Rejection) error) httplimit.Option {
	return httplimit.AdapterOption("echolimit", "WithDenyHandler", h)
}

// adapter is this package to the engine: an HTTP adapter that reads its
// WithDenyHandler and reports outcomes.
var adapter = httplimit.Adapter{
	Name:    "echolimit",
	Options: map[string]reflect.Type{"WithDenyHandler": reflect.TypeFor[denyHandler]()},
	Outcome: true,
}

// NewMiddleware returns the rate-limiting middleware applying l (and any
// [httplimit.WithCheck] limiters), or a configuration error naming the option to fix.
//
// Use it globally, per group or per route:
//
//	e.Use(echolimit.New(apiLimiter))
//	e.POST("/login", login, echolimit.New(loginLimiter))
//
// The route pattern is c.Path() ("/users/:id"). Echo routes before running
// e.Use middleware, so a global middleware keys each endpoint separately;
// in e.Pre middleware the route is not known yet (one quota per client).
// Requests are keyed by the TCP peer (c.Request().RemoteAddr), never by
// c.RealIP(), which trusts X-Forwarded-For and X-Real-IP by default.
//
// The middleware is safe for concurrent use and never panics on a
// request.
func NewMiddleware(l *core.Limiter, opts ...httplimit.Option) (echo.MiddlewareFunc, error) {
	e, err := httplimit.NewAdapterEngine(adapter, l, opts...)
	if err != nil {
		return nil, err
	}
	deny, err := httplimit.AdapterOptionValue[denyHandler](e, "WithDenyHandler")
	if err != nil {
		return nil, err
	}
	parts, route := e.PartsKeyed()
	wrap := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// decided from the KeyParts when the engine's key cache knows
			// them (see httplimit.Engine.Decide), else through a
			// request view
			var res httplimit.Result
			var p httplimit.KeyParts
			hr := c.Request()
			if !parts || !e.Decide(hr.Context(), nil, keyParts(&p, c, hr, route), &res) {
				decideView(e, c, hr, &res)
			}
			if res.Action == httplimit.Skip {
				return next(c)
			}
			e.SetHTTP(&res, c.Response().Header())
			if res.Action == httplimit.Pass {
				if id, ok := res.Identity(); ok { // for Identity, in the handler
					c.SetRequest(hr.WithContext(httplimit.ContextWithIdentity(hr.Context(), id)))
				}
				if e.CountsOutcome() {
					return serveCounted(e, &res, next, c)
				}
				return next(c)
			}
			rej := e.Reject(&res)
			if deny != nil {
				return deny(c, rej)
			}
			return WriteRejection(c, rej)
		}
	}
	cached := new(wrapCache).middleware(wrap)
	if f := e.InFlight(); f != nil {
		// WithInFlight: the request is counted from before the decision
		// until the rest of the chain has returned
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			h := cached(next)
			return func(c echo.Context) error {
				f.Enter()
				defer f.Exit()
				return h(c)
			}
		}, nil
	}
	return cached, nil
}

// New is [NewMiddleware] that panics on a configuration error, for
// start-up code.
func New(l *core.Limiter, opts ...httplimit.Option) echo.MiddlewareFunc {
	mw, err := NewMiddleware(l, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// WriteRejection writes rej's default denial (status, Content-Type, body);
// for a deny handler ([WithDenyHandler]) that only wants to add something.
func WriteRejection(c echo.Context, rej httplimit.Rejection) error {
	resp := c.Response()
	if rej.ContentType != "" {
		resp.Header()["Content-Type"] = []string{rej.ContentType}
	}
	resp.WriteHeader(rej.Status)
	_, err := resp.Write(rej.Body)
	return err
}

// decideView decides c, whose request is hr, through a request view
// from the pool.
func decideView(e *httplimit.Engine, c echo.Context, hr *http.Request, res *httplimit.Result) {
	req := requests.Get().(*request)
	req.c = c
	e.Decide(hr.Context(), req, nil, res)
	req.c = nil
	requests.Put(req)
}

// requests pools the request views: echo.Context is an interface, so the
// view needs a struct around it, and pooling keeps that struct off the
// heap per request. Key functions never retain the view
// (keyfuncs.Request's contract).
var requests = sync.Pool{New: func() any { return new(request) }}

type request struct{ c echo.Context }

var _ keyfuncs.Request = (*request)(nil)

// KeyParts implements httplimit.KeyParter: the request's method, the
// route and the peer in one pass over the context (c.Path() is the
// route's own string), and as Table the Echo's registrations that say
// whether the route accepts every method (the scope's method is a
// function of them, the route and the request's method: the key cache
// finds it without asking).
func (r *request) KeyParts(route bool) (p httplimit.KeyParts, ok bool) {
	keyParts(&p, r.c, r.c.Request(), route)
	return p, true
}

// keyParts fills the zero *p from c, whose request is hr, and returns p.
func keyParts(p *httplimit.KeyParts, c echo.Context, hr *http.Request, route bool) *httplimit.KeyParts {
	p.Peer, p.StableRoute = hr.RemoteAddr, true
	if route {
		p.Method = hr.Method
		if unrouted(c.Handler()) {
			return p
		}
		p.Route = c.Path()
		if e := c.Echo(); e != nil && p.Route != "" {
			p.Table = anyRoutes.Table(e)
		}
	}
	return p
}

// AnyMethod implements httplimit.Request: whether the matched route
// is registered under every method e.Any registers (its scope is then the
// route alone).
func (r *request) AnyMethod() bool { return anyMethod(r.c, r.Route()) }

func anyMethod(c echo.Context, route string) bool {
	e := c.Echo()
	return route != "" && e != nil && anyRoutes.AnyMethod(e, route)
}

// anyMethods is what echo's Any registers.
var anyMethods = []string{
	http.MethodConnect, http.MethodDelete, http.MethodGet, http.MethodHead,
	http.MethodOptions, http.MethodPatch, http.MethodPost, echo.PROPFIND,
	http.MethodPut, http.MethodTrace, echo.REPORT,
}

// anyRoutes indexes the routes of every router of each Echo (the default
// one and each host's).
var anyRoutes = httplimit.NewAnyRoutes(anyMethods, func(e *echo.Echo, yield func(method, pattern string)) {
	for _, rt := range e.Routes() {
		yield(rt.Method, rt.Path)
	}
	for _, router := range e.Routers() {
		for _, rt := range router.Routes() {
			yield(rt.Method, rt.Path)
		}
	}
})

func (r *request) Method() string { return r.c.Request().Method }

// Route is echo's matched route pattern, or "" when echo routed the
// request to no route: its NotFoundHandler or MethodNotAllowedHandler.
// For those echo's c.Path() names the nearest route node ("/users/:id"
// for GET /users/1/x), which would charge a path that reaches no route to
// that route's quota; the other adapters give every such request the
// empty ("unmatched") scope, and so does this one.
func (r *request) Route() string {
	if unrouted(r.c.Handler()) {
		return ""
	}
	return r.c.Path()
}

// unrouted reports whether h is echo's NotFoundHandler or
// MethodNotAllowedHandler (read when called: they are variables), which
// echo's router sets when no route serves the request. Function values
// compare by their code pointers.
func unrouted(h echo.HandlerFunc) bool {
	p := codePtr(h)
	return p == 0 || p == codePtr(echo.NotFoundHandler) || p == codePtr(echo.MethodNotAllowedHandler)
}

func (r *request) Path() string { return r.c.Request().URL.Path }

func (r *request) Header(name string) string { return r.c.Request().Header.Get(name) }

func (r *request) HeaderValues(name string) []string { return r.c.Request().Header.Values(name) }

func (r *request) Query(name string) string { return keyfuncs.FromHTTP(r.c.Request()).Query(name) }

// RemoteAddr is the TCP peer, not c.RealIP().
func (r *request) RemoteAddr() string { return r.c.Request().RemoteAddr }

// Value looks in the echo context's store (c.Set, string keys), then in the
// request's context.
func (r *request) Value(key any) any {
	if s, ok := key.(string); ok {
		if v := r.c.Get(s); v != nil {
			return v
		}
	}
	return r.c.Request().Context().Value(key)
}
