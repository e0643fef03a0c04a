package ginlimit

import (
	"bufio"
	"net"
	"net/http"
	"reflect"

	"github.com/gin-gonic/gin"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// denyHandler is what [WithDenyHandler] takes.
type denyHandler = func(c *gin.Context, rej httplimit.Rejection)

// WithDenyHandler replaces the whole denial (status, body) with h, which
// writes a denial in place of the default one: the rate-limit headers (and
// Retry-After) are already set; h writes the status and body. The
// middleware aborts the chain after it returns.
// It applies to quota, no-key and store-unavailable denials alike (rej.Reason tells them
// apart). h must not be nil. Only this package's middleware accepts it:
// another adapter given it fails at construction, naming both packages.
func WithDenyHandler(h func(c *gin.Context, rej httplimit.Rejection)) httplimit.Option {
	return httplimit.AdapterOption("ginlimit", "WithDenyHandler", h)
}

// adapter is this package to the engine: an HTTP adapter that reads its
// WithDenyHandler and reports outcomes.
var adapter = httplimit.Adapter{
	Name:    "ginlimit",
	Options: map[string]reflect.Type{"WithDenyHandler": reflect.TypeFor[denyHandler]()},
	Outcome: true,
}

// NewMiddleware returns the rate-limiting middleware applying l (and any
// [httplimit.WithCheck] limiters), or a configuration error naming the option to fix.
//
// Use it globally or per route or group:
//
//	r.Use(ginlimit.New(apiLimiter))
//	r.POST("/login", ginlimit.New(loginLimiter), login)
//
// The route pattern is c.FullPath() ("/users/:id"), which gin knows before
// any handler of the route runs, so even a global middleware keys each
// endpoint separately. Requests are keyed by the TCP peer
// (c.Request.RemoteAddr), never by c.ClientIP(), which trusts
// X-Forwarded-For by default.
//
// The middleware is safe for concurrent use and never panics on a
// request.
func NewMiddleware(l *core.Limiter, opts ...httplimit.Option) (gin.HandlerFunc, error) {
	e, err := httplimit.NewAdapterEngine(adapter, l, opts...)
	if err != nil {
		return nil, err
	}
	deny, err := httplimit.AdapterOptionValue[denyHandler](e, "WithDenyHandler")
	if err != nil {
		return nil, err
	}
	m := &middleware{e: e, deny: deny, inflight: e.InFlight()}
	m.parts, m.route = e.PartsKeyed()
	if m.inflight != nil {
		return m.counted, nil
	}
	return m.handle, nil
}

// New is [NewMiddleware] that panics on a configuration error, for
// start-up code.
func New(l *core.Limiter, opts ...httplimit.Option) gin.HandlerFunc {
	h, err := NewMiddleware(l, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

type middleware struct {
	e            *httplimit.Engine
	deny         denyHandler
	inflight     *core.InFlight
	parts, route bool // what e.PartsKeyed says
}

// counted is handle with WithInFlight: the request is counted from before
// the decision until the rest of the chain (run here with c.Next) has
// returned.
func (m *middleware) counted(c *gin.Context) {
	m.inflight.Enter()
	defer m.inflight.Exit()
	m.handle(c)
	if !c.IsAborted() {
		c.Next()
	}
}

func (m *middleware) handle(c *gin.Context) {
	var res httplimit.Result
	m.decide(c, &res)
	if res.Action == httplimit.Skip {
		return
	}
	m.e.SetHTTP(&res, c.Writer.Header())
	if res.Action == httplimit.Pass {
		if id, ok := res.Identity(); ok { // for Identity, in the handler
			c.Request = c.Request.WithContext(httplimit.ContextWithIdentity(c.Request.Context(), id))
		}
		if m.e.CountsOutcome() {
			// counting by outcome: the rest of the chain runs here, so
			// that its status is known
			m.serveCounted(c, &res)
		}
		return
	}
	rej := m.e.Reject(&res)
	if m.deny != nil {
		m.deny(c, rej)
	} else {
		WriteRejection(c, rej)
	}
	c.Abort()
}

// serveCounted runs the rest of the chain and settles the request's
// outcome: the status written or set (gin writes a status set with
// c.Status when the chain ends), httplimit.OutcomeUnwritten when the
// chain neither wrote anything nor set a status other than gin's default
// 200 (a connection hijacked with no status set included: gin reads it
// as written, with its default 200), httplimit.OutcomePanic when it
// panicked (the panic goes on unchanged to the recovery middleware
// outside this one); the engine makes a request whose context has ended
// a counted failure.
func (m *middleware) serveCounted(c *gin.Context, res *httplimit.Result) {
	hw := &hijackWriter{ResponseWriter: c.Writer}
	c.Writer = hw
	done := false
	defer func() {
		if !done {
			m.e.Outcome(c.Request.Context(), res, httplimit.OutcomePanic)
		}
	}()
	c.Next()
	done = true
	if c.Writer == hw {
		c.Writer = hw.ResponseWriter
	}
	status := c.Writer.Status()
	if status == http.StatusOK && (!c.Writer.Written() || hw.hijacked) {
		status = httplimit.OutcomeUnwritten
	}
	m.e.Outcome(c.Request.Context(), res, status)
}

// hijackWriter records whether the chain hijacked the connection, for
// counting by outcome: gin marks a hijacked response written, with its
// default status 200, whatever the handler sent on the connection.
type hijackWriter struct {
	gin.ResponseWriter
	hijacked bool
}

// Hijack implements http.Hijacker, forwarding to gin's writer.
func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return w.ResponseWriter.Hijack()
}

// Unwrap returns gin's writer, for http.ResponseController.
func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// decide decides c's request: by its KeyParts, read without an
// interface call, when the engine's keys are a function of them.
func (m *middleware) decide(c *gin.Context, res *httplimit.Result) {
	v := (*request)(c)
	if m.parts {
		var p httplimit.KeyParts
		v.keyParts(&p, m.route)
		m.e.Decide(c.Request.Context(), v, &p, res)
		return
	}
	m.e.Decide(c.Request.Context(), v, nil, res)
}

// WriteRejection writes rej's default denial (status, Content-Type, body)
// and aborts the chain; for a deny handler ([WithDenyHandler]) that only wants to add
// something.
func WriteRejection(c *gin.Context, rej httplimit.Rejection) {
	if rej.ContentType != "" {
		c.Writer.Header()["Content-Type"] = []string{rej.ContentType}
	}
	c.Writer.WriteHeader(rej.Status)
	_, _ = c.Writer.Write(rej.Body)
	c.Abort()
}

// request is the keyfuncs.Request view of a gin context: a pointer
// conversion, so building it does not allocate.
type request gin.Context

var _ keyfuncs.Request = (*request)(nil)

func (r *request) ctx() *gin.Context { return (*gin.Context)(r) }

func (r *request) Method() string { return r.Request.Method }

// Route is gin's matched route pattern, "" when no route matched.
func (r *request) Route() string { return r.ctx().FullPath() }

func (r *request) Path() string { return r.Request.URL.Path }

func (r *request) Header(name string) string { return r.Request.Header.Get(name) }

func (r *request) HeaderValues(name string) []string { return r.Request.Header.Values(name) }

func (r *request) Query(name string) string { return keyfuncs.FromHTTP(r.Request).Query(name) }

// RemoteAddr is the TCP peer, not c.ClientIP().
func (r *request) RemoteAddr() string { return r.Request.RemoteAddr }

// KeyParts implements httplimit.KeyParter: the request's method, Route
// and RemoteAddr without three interface calls, and as Table the engine's
// registrations that say whether the route accepts every method (the
// scope's method is a function of them, the route and the request's
// method: the key cache finds it without asking). FullPath is the
// route's own string.
func (r *request) KeyParts(route bool) (p httplimit.KeyParts, ok bool) {
	r.keyParts(&p, route)
	return p, true
}

// keyParts writes KeyParts into *p, which must be zero (no copy of the
// struct on the middleware's path).
func (r *request) keyParts(p *httplimit.KeyParts, route bool) {
	p.Peer, p.StableRoute = r.Request.RemoteAddr, true
	if route {
		p.Method, p.Route = r.Request.Method, r.ctx().FullPath()
		if e := engineOf(r.ctx()); e != nil && p.Route != "" {
			p.Table = anyRoutes.Table(e)
		}
	}
}

// AnyMethod implements httplimit.Request: whether the matched route
// is registered under every method r.Any registers (its scope is then the
// route alone).
func (r *request) AnyMethod() bool { return r.anyMethod(r.ctx().FullPath()) }

func (r *request) anyMethod(route string) bool {
	e := engineOf(r.ctx())
	return route != "" && e != nil && anyRoutes.AnyMethod(e, route)
}

// anyMethods is what gin's RouterGroup.Any registers.
var anyMethods = []string{
	http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodHead, http.MethodOptions, http.MethodDelete, http.MethodConnect,
	http.MethodTrace,
}

// anyRoutes indexes the routes of each gin.Engine, by its public
// Routes().
var anyRoutes = httplimit.NewAnyRoutes(anyMethods, func(e *gin.Engine, yield func(method, pattern string)) {
	for _, ri := range e.Routes() {
		yield(ri.Method, ri.Path)
	}
})

// Value looks in the gin context's keys (c.Set, where gin authentication
// middleware leaves the principal), then in the request's context.
func (r *request) Value(key any) any {
	if v, ok := r.ctx().Get(key); ok {
		return v
	}
	return r.Request.Context().Value(key)
}
