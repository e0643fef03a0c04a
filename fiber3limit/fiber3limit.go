package fiber3limit

import (
	"errors"
	"sync"

	"github.com/gofiber/fiber/v3"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// denyHandler is what [WithDenyHandler] takes.
type denyHandler = func(c fiber.Ctx, rej httplimit.Rejection) error

// WithDenyHandler replaces the whole denial (status, body) with h, which
// writes a denial in place of the default one: the rate-limit headers (and
// Retry-After) are already set; h writes the status and body. Its error is
// returned to fiber (and its ErrorHandler); the next handler is not called.
// It applies to quota, no-key and store-unavailable denials alike (rej.Reason tells them
// apart). h must not be nil. Only this package's middleware accepts it:
// another adapter given it fails at construction, naming both packages.
func WithDenyHandler(h func(c fiber.Ctx, rej httplimit.Rejection) error) httplimit.Option {
	return httplimit.AdapterOption("fiber3limit", "WithDenyHandler", h)
}

// NewMiddleware returns the rate-limiting middleware applying l (and any
// httplimit.WithCheck limiters), or a configuration error naming the
// option to fix.
//
// Use it globally, per group or per route:
//
//	app.Use(fiber3limit.New(apiLimiter))
//	app.Post("/login", login, fiber3limit.New(loginLimiter)) // fiber v3: handler first
//
// A global (app.Use) middleware keys each route separately: fiber runs
// it before it knows the route, so the adapter finds the route the
// request will reach among the app's routes (see the package doc).
// Requests are keyed by the TCP peer, never by c.IP() with a proxy
// header.
//
// The middleware is safe for concurrent use and never panics on a
// request.
func NewMiddleware(l *core.Limiter, opts ...httplimit.Option) (fiber.Handler, error) {
	g, err := newEngine(l, opts)
	if err != nil {
		return nil, err
	}
	if f := g.inflight; f != nil {
		// httplimit.WithInFlight: the request is counted from before the
		// decision until the rest of the chain has returned
		return func(c fiber.Ctx) error {
			f.Enter()
			defer f.Exit()
			return g.serve(c)
		}, nil
	}
	return g.serve, nil
}

// New is [NewMiddleware] that panics on a configuration error, for
// start-up code.
func New(l *core.Limiter, opts ...httplimit.Option) fiber.Handler {
	h, err := NewMiddleware(l, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// views pools the request views: fiber.Ctx is an interface, so the view
// is a struct around it, and pooling keeps that struct off the heap per
// request. Key functions never retain the view (keyfuncs.Request's
// contract).
var views = sync.Pool{New: func() any { return new(request) }}

// serve decides c's request and passes it on or denies it.
func (g *engine) serve(c fiber.Ctx) error {
	var res decision
	v := views.Get().(*request)
	v.c = c
	g.decide(c.Context(), v, &res)
	v.c = nil
	views.Put(v)
	if skipped(&res) {
		return c.Next()
	}
	g.setHeaders(&res, &c.Response().Header)
	if passed(&res) {
		if id, ok := identityOf(&res); ok { // for Identity, in the handler
			c.Locals(identityLocal{}, id)
		}
		if g.outcome {
			return g.serveCounted(c, &res)
		}
		return c.Next()
	}
	rej := g.reject(&res)
	if g.deny != nil {
		return g.deny(c, rej)
	}
	return WriteRejection(c, rej)
}

// WriteRejection writes rej's default denial (status, Content-Type, body);
// for a deny handler ([WithDenyHandler]) that only wants to add something.
func WriteRejection(c fiber.Ctx, rej httplimit.Rejection) error {
	c.Status(rej.Status)
	if rej.ContentType != "" {
		c.Response().Header.SetContentType(rej.ContentType)
	}
	c.Response().SetBodyRaw(rej.Body) // shared and never modified
	return nil
}

type identityLocal struct{}

// Identity returns the identity the middleware charged c's request under:
// the client key of its httplimit.WithKey function (a login form's
// username with keyfuncs.FormField), which a middleware with
// httplimit.WithIdentity stores in c's locals before calling the handler.
// A login handler checks the password of exactly this username, and
// refuses the request when Identity reports false (no limiter, no
// WithIdentity, an IP key, the fallback key). See httplimit.Identity for
// the bound on its length.
func Identity(c fiber.Ctx) (string, bool) {
	if c == nil {
		return "", false
	}
	id, ok := c.Locals(identityLocal{}).(string)
	return id, ok && id != ""
}

// outcomeStatus is the outcome of a response for counting by outcome
// (httplimit.WithOutcome): for an error the handler returned, the status
// fiber's error handler sends (a *fiber.Error's code, else 500);
// otherwise the status written, or unwritten when the response is a bare
// 200 with no body (what fiber sends when the handler writes nothing).
func outcomeStatus(c fiber.Ctx, err error) int {
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) {
			return fe.Code
		}
		return fiber.StatusInternalServerError
	}
	resp := c.Response()
	status := resp.StatusCode()
	if status == fiber.StatusOK && len(resp.Body()) == 0 && !resp.IsBodyStream() {
		return outcomeUnwritten
	}
	return status
}

// serveCounted runs the rest of the chain and settles the request's
// outcome (outcomeStatus, or a panic's: the panic goes on unchanged to a
// recovery middleware outside this one).
func (g *engine) serveCounted(c fiber.Ctx, res *decision) error {
	done := false
	defer func() {
		if !done {
			g.settle(c.Context(), res, outcomePanic)
		}
	}()
	err := c.Next()
	done = true
	g.settle(c.Context(), res, outcomeStatus(c, err))
	return err
}
