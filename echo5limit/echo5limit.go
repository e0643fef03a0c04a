package echo5limit

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// denyHandler is what [WithDenyHandler] takes.
type denyHandler = func(c *echo.Context, rej httplimit.Rejection) error

// WithDenyHandler replaces the whole denial (status, body) with h, which
// writes a denial in place of the default one: the rate-limit headers (and
// Retry-After) are already set; h writes the status and body. Its error is
// returned to echo (and its HTTPErrorHandler); the next handler is not
// called.
// It applies to quota, no-key and store-unavailable denials alike (rej.Reason tells them
// apart). h must not be nil. Only this package's middleware accepts it:
// another adapter given it fails at construction, naming both packages.
func WithDenyHandler(h func(c *echo.Context, rej httplimit.Rejection) error) httplimit.Option {
	return httplimit.AdapterOption("echo5limit", "WithDenyHandler", h)
}

// NewMiddleware returns the rate-limiting middleware applying l (and any
// httplimit.WithCheck limiters), or a configuration error naming the
// option to fix.
//
// Use it globally, per group or per route:
//
//	e.Use(echo5limit.New(apiLimiter))
//	e.POST("/login", login, echo5limit.New(loginLimiter))
//
// The route pattern is c.Path() ("/users/:id"). Echo routes before
// running e.Use middleware, so a global middleware keys each endpoint
// separately; in e.Pre middleware the route is not known yet (one quota
// per client). Requests are keyed by the TCP peer
// (c.Request().RemoteAddr), never by c.RealIP().
//
// The middleware is safe for concurrent use and never panics on a
// request.
func NewMiddleware(l *core.Limiter, opts ...httplimit.Option) (echo.MiddlewareFunc, error) {
	g, err := newEngine(l, opts)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := func(c *echo.Context) error { return g.serve(c, next) }
		if f := g.inflight; f != nil {
			// httplimit.WithInFlight: the request is counted from before
			// the decision until the rest of the chain has returned
			return func(c *echo.Context) error {
				f.Enter()
				defer f.Exit()
				return h(c)
			}
		}
		return h
	}, nil
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

// serve decides c's request and passes it to next or denies it.
func (g *engine) serve(c *echo.Context, next echo.HandlerFunc) error {
	var res decision
	hr := c.Request()
	g.decide(hr.Context(), (*request)(c), &res)
	if skipped(&res) {
		return next(c)
	}
	g.setHeaders(&res, c.Response().Header())
	if passed(&res) {
		if ctx, ok := withIdentity(hr.Context(), &res); ok { // for Identity, in the handler
			c.SetRequest(hr.WithContext(ctx))
		}
		if g.outcome {
			return g.serveCounted(&res, next, c)
		}
		return next(c)
	}
	rej := g.reject(&res)
	if g.deny != nil {
		return g.deny(c, rej)
	}
	return WriteRejection(c, rej)
}

// WriteRejection writes rej's default denial (status, Content-Type, body);
// for a deny handler ([WithDenyHandler]) that only wants to add something.
func WriteRejection(c *echo.Context, rej httplimit.Rejection) error {
	w := c.Response()
	if rej.ContentType != "" {
		w.Header()["Content-Type"] = []string{rej.ContentType}
	}
	w.WriteHeader(rej.Status)
	_, err := w.Write(rej.Body)
	return err
}

// Identity returns the identity the middleware charged c's request under:
// the client key of its httplimit.WithKey function (a login form's
// username with keyfuncs.FormField), which a middleware with
// httplimit.WithIdentity puts on c.Request()'s context before calling the
// handler. A login handler checks the password of exactly this username,
// and refuses the request when Identity reports false (no limiter, no
// WithIdentity, an IP key, the fallback key). See httplimit.Identity for
// the bound on its length.
func Identity(c *echo.Context) (string, bool) {
	if c == nil || c.Request() == nil {
		return "", false
	}
	return identity(c.Request().Context())
}

// outcomeStatus is the outcome of a response for counting by outcome
// (httplimit.WithOutcome): the status written; for an error the handler
// returned without writing, the status echo's error handler will send
// (echo.StatusCode: an HTTPStatusCoder's code, else 500); unwritten when
// the handler returned nil without writing anything.
func outcomeStatus(c *echo.Context, err error) int {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return r.Status
	}
	if err == nil {
		return outcomeUnwritten
	}
	if code := echo.StatusCode(err); code != 0 {
		return code
	}
	return http.StatusInternalServerError
}

// serveCounted runs next and settles the request's outcome
// (outcomeStatus, or a panic's: the panic goes on unchanged to a
// recovery middleware outside this one).
func (g *engine) serveCounted(res *decision, next echo.HandlerFunc, c *echo.Context) error {
	done := false
	defer func() {
		if !done {
			g.settle(c.Request().Context(), res, outcomePanic)
		}
	}()
	err := next(c)
	done = true
	g.settle(c.Request().Context(), res, outcomeStatus(c, err))
	return err
}
