package fiberlimit

import (
	"encoding/binary"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// denyHandler is what [WithDenyHandler] takes.
type denyHandler = func(c *fiber.Ctx, rej httplimit.Rejection) error

// WithDenyHandler replaces the whole denial (status, body) with h, which
// writes a denial in place of the default one: the rate-limit headers (and
// Retry-After) are already set; h writes the status and body. Its error is
// returned to fiber (and its ErrorHandler); the next handler is not called.
// It applies to quota, no-key and store-unavailable denials alike (rej.Reason tells them
// apart). h must not be nil. Only this package's middleware accepts it:
// another adapter given it fails at construction, naming both packages.
func WithDenyHandler(h func(c *fiber.Ctx, rej httplimit.Rejection) error) httplimit.Option {
	return httplimit.AdapterOption("fiberlimit", "WithDenyHandler", h)
}

// adapter is this package to the engine: an HTTP adapter that reads its
// WithDenyHandler and reports outcomes.
var adapter = httplimit.Adapter{
	Name:    "fiberlimit",
	Options: map[string]reflect.Type{"WithDenyHandler": reflect.TypeFor[denyHandler]()},
	Outcome: true,
}

// NewMiddleware returns the rate-limiting middleware (fiber v2) applying l
// (and any [httplimit.WithCheck] limiters), or a configuration error naming the
// option to fix.
//
// Use it per route, or globally with app.Use (or group.Use); either way
// each endpoint is keyed by its pattern:
//
//	app.Post("/login", fiberlimit.New(loginLimiter), login)
//	app.Use(fiberlimit.New(apiLimiter)) // each route its own quota per client
//
// Inside a route the pattern is c.Route().Path. fiber runs app.Use
// handlers before it chooses the final route, so there the middleware
// looks the request's method and path up among the app's routes, with
// fiber's matching rules, and takes the pattern of the route fiber will
// run (the first match in registration order; Use handlers such as
// app.Static are not routes). The lookup table is built at the first
// request and rebuilt only when the app's number of routes changes (the
// tables of the last eight apps served this way are kept); it holds
// nothing derived from requests. Static patterns, literal segments,
// ":param", a last ":param?" and a last "*" or "+" are matched without
// allocating; patterns beyond those (constraints such as ":id<int>",
// several parameters in one segment, escapes) are matched by
// fiber.RoutePatternMatch, which allocates per request and route tried
// (the default key skips the lookup for a returning client and path). A request that matches no route
// (a 404 or 405) gets the empty scope: such requests share one quota per
// client, as on the other adapters. [httplimit.WithScope] and [httplimit.WithScopeFunc]
// replace the route scope. Requests are keyed by the TCP peer (fasthttp's
// RemoteAddr), never by c.IP(), which reads the configured proxy header.
//
// The middleware is safe for concurrent use and never panics on a
// request. With the default key and one hot key it allocates nothing.
func NewMiddleware(l *core.Limiter, opts ...httplimit.Option) (fiber.Handler, error) {
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
func New(l *core.Limiter, opts ...httplimit.Option) fiber.Handler {
	h, err := NewMiddleware(l, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

type middleware struct {
	e            *httplimit.Engine
	deny         denyHandler
	inflight     *core.InFlight // WithInFlight's counter, or nil
	parts, route bool           // what e.PartsKeyed says
}

// counted is handle with WithInFlight: the request is counted from before
// the decision until the rest of the chain (c.Next, inside handle) has
// returned.
func (m *middleware) counted(c *fiber.Ctx) error {
	m.inflight.Enter()
	defer m.inflight.Exit()
	return m.handle(c)
}

func (m *middleware) handle(c *fiber.Ctx) error {
	var res httplimit.Result
	m.decide(c, &res)
	if res.Action == httplimit.Skip {
		return c.Next()
	}
	var t httplimit.Triple
	if m.e.Triple(&res, &t) {
		setTriple(&c.Response().Header, &t)
	} else {
		var f httplimit.Fields
		m.e.Fields(&res, &f)
		setFields(&c.Response().Header, &f)
	}
	if res.Action == httplimit.Pass {
		if id, ok := res.Identity(); ok { // for Identity, in the handler
			c.Locals(identityLocal{}, id)
		}
		if m.e.CountsOutcome() {
			return m.serveCounted(c, &res)
		}
		return c.Next()
	}
	rej := m.e.Reject(&res)
	if m.deny != nil {
		return m.deny(c, rej)
	}
	return WriteRejection(c, rej)
}

// WriteRejection writes rej's default denial (status, Content-Type, body);
// for a deny handler ([WithDenyHandler]) that only wants to add something.
func WriteRejection(c *fiber.Ctx, rej httplimit.Rejection) error {
	c.Status(rej.Status)
	if rej.ContentType != "" {
		c.Response().Header.SetContentType(rej.ContentType)
	}
	c.Response().SetBodyRaw(rej.Body) // shared and never modified
	return nil
}

// decide decides c's request: by its KeyParts, read without an
// interface call, when the engine's keys are a function of them.
func (m *middleware) decide(c *fiber.Ctx, res *httplimit.Result) {
	v := (*request)(c)
	var p httplimit.KeyParts
	if m.parts && v.keyParts(&p, m.route) {
		m.e.Decide(c.UserContext(), v, &p, res)
		return
	}
	m.e.Decide(c.UserContext(), v, nil, res)
}

// request is the keyfuncs.Request view of a fiber context: a pointer
// conversion, so building it does not allocate. Strings it returns are
// fiber's, valid until the handler returns (keyfuncs never retains them).
type request fiber.Ctx

var _ keyfuncs.Request = (*request)(nil)

func (r *request) ctx() *fiber.Ctx { return (*fiber.Ctx)(r) }

func (r *request) Method() string { return r.ctx().Method() }

// Route is the matched route's pattern (c.Route().Path). Inside an
// app.Use or group.Use handler, which runs before fiber has chosen the
// final route, it is the pattern of the route fiber will run for the
// request's method and path (see routes.go and fastroutes.go), or "" when
// none matches.
func (r *request) Route() string {
	c := r.ctx()
	rt := c.Route()
	if rt == nil {
		return ""
	}
	t := appTable(c.App())
	if !t.isUse(rt) {
		return rt.Path
	}
	return t.match(c.Method(), c.Path())
}

// KeyParts implements httplimit.KeyParter: the default key's parts without
// rendering the peer or, under app.Use, resolving the route: the route
// table and the path stand for the route the table resolves the path to.
// A peer that is not IPv4 is left to the general path.
func (r *request) KeyParts(route bool) (p httplimit.KeyParts, ok bool) {
	ok = r.keyParts(&p, route)
	return p, ok
}

// keyParts writes KeyParts into *p, which must be zero (no copy of the
// struct on the middleware's path), and reports KeyParts' ok.
func (r *request) keyParts(p *httplimit.KeyParts, route bool) bool {
	c := r.ctx()
	tcp, ok := c.Context().RemoteAddr().(*net.TCPAddr)
	if !ok {
		return false
	}
	ip4 := tcp.IP.To4()
	if ip4 == nil {
		return false
	}
	p.PeerIP = 1<<32 | uint64(binary.BigEndian.Uint32(ip4))
	if !route {
		return true
	}
	p.Method = c.Method()
	if rt := c.Route(); rt != nil {
		t := appTable(c.App())
		if t.isUse(rt) {
			// the table, the method and the path determine the route
			// and whether it accepts every method
			p.Table, p.Route = t.id, c.Path()
		} else {
			// the request's own method: the parts only find the
			// entry of the key the general path derived (HEAD's
			// entry holds the GET scope's key), see httplimit.KeyParts
			p.Route = rt.Path
		}
	}
	return true
}

// AnyMethod implements httplimit.Request: whether the route is
// registered under every method of the app's RequestMethods (app.All),
// whose scope is then the route alone.
func (r *request) AnyMethod() bool {
	route := r.Route()
	return route != "" && appTable(r.ctx().App()).any[route]
}

func (r *request) Path() string { return r.ctx().Path() }

func (r *request) Header(name string) string { return r.ctx().Get(name) }

func (r *request) HeaderValues(name string) []string {
	vs := r.ctx().Request().Header.PeekAll(name)
	if len(vs) == 0 {
		return nil
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func (r *request) Query(name string) string { return r.ctx().Query(name) }

// RemoteAddr is the TCP peer ("ip:port"), not c.IP(). It is rendered into
// an interned string, so a returning client costs no allocation.
// PeerAddr implements httplimit.PeerAddrer: the default key reads the
// peer's address without rendering and parsing RemoteAddr.
func (r *request) PeerAddr() netip.Addr {
	tcp, ok := r.ctx().Context().RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return netip.Addr{}
	}
	return ip.Unmap()
}

func (r *request) RemoteAddr() string {
	addr := r.ctx().Context().RemoteAddr()
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		if addr == nil {
			return ""
		}
		return addr.String()
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return ""
	}
	var buf [64]byte
	b := buf[:0]
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.Is6() {
		b = append(b, '[')
		b = ip.AppendTo(b)
		b = append(b, ']')
	} else {
		b = ip.AppendTo(b)
	}
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(tcp.Port), 10)
	return peers.intern(b)
}

// Value looks in fiber's Locals, then in the user context.
func (r *request) Value(key any) any {
	if v := r.ctx().Locals(key); v != nil {
		return v
	}
	return r.ctx().UserContext().Value(key)
}

// setFields writes f into h. The names are canonical already, so they are
// set as they are (SetCanonical: no normalising copy, which costs more
// than the rest). SetCanonical copies name and value into the header
// (for these names; only Set-Cookie, Content-Type and the like are
// special), but in fasthttp 1.69 its value parameter escapes, so a
// value converted or formatted on the stack would be allocated per
// field: values are copied into a pooled buffer instead (a name stays a
// stack conversion, which does not escape).
func setFields(h *fasthttp.ResponseHeader, f *httplimit.Fields) {
	bp := valueBufs.Get().(*valueBuf)
	for i := 0; i < f.Len(); i++ {
		name, dyn, static := f.At(i)
		if static != "" {
			dyn = append(bp[:0], static...)
		} else {
			dyn = append(bp[:0], dyn...)
		}
		h.SetCanonical([]byte(name), dyn)
	}
	valueBufs.Put(bp)
}

// setTriple writes the common response's fields (see httplimit.Triple), as
// setFields would write them, without building Fields.
func setTriple(h *fasthttp.ResponseHeader, t *httplimit.Triple) {
	bp := valueBufs.Get().(*valueBuf)
	h.SetCanonical([]byte(fieldLimit), append(bp[:0], t.Limit...))
	h.SetCanonical([]byte(fieldRemaining), httplimit.IntText(bp[:20], t.Remaining))
	if t.Reset == "" {
		h.SetCanonical([]byte(fieldReset), httplimit.IntText(bp[:20], t.ResetN))
	} else {
		h.SetCanonical([]byte(fieldReset), append(bp[:0], t.Reset...))
	}
	valueBufs.Put(bp)
}

// The names of the X-RateLimit triple's fields in the canonical form
// fasthttp stores them (what httplimit.Fields.At names them; the
// conformance suite reads them back).
const (
	fieldLimit     = "X-Ratelimit-Limit"
	fieldRemaining = "X-Ratelimit-Remaining"
	fieldReset     = "X-Ratelimit-Reset"
)

// valueBuf holds one header value while SetCanonical copies it: a longer
// value is appended past it (allocated), never truncated.
type valueBuf [64]byte

var valueBufs = sync.Pool{New: func() any { return new(valueBuf) }}
