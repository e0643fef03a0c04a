package fiber3limit

import (
	"hash/maphash"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/gofiber/fiber/v3"

	"github.com/limitkit/limitkit/keyfuncs"
)

// request is the keyfuncs.Request view of a fiber context.
type request struct{ c fiber.Ctx }

var _ keyfuncs.Request = (*request)(nil)

func (r *request) Method() string { return r.c.Method() }

// Route is the pattern of the route that serves the request ("" when
// none does). Under a route's own middleware it is c.Route().Path. Under
// app.Use (and a group's or a mount's Use) fiber's c.Route() is the Use
// registration, so the route is looked up among the app's routes: the
// first route of the request's method, in fiber's order, whose pattern
// matches the path by fiber.RoutePatternMatch with the app's
// CaseSensitive and StrictRouting, within fiber's buckets (see
// bucketOf), as fiber's router picks it.
func (r *request) Route() string {
	c := r.c
	rt := c.Route()
	if rt == nil {
		return ""
	}
	t := tableOf(c.App(), rt)
	if t.own[rt] {
		return rt.Path
	}
	return t.match(c.Method(), c.Path())
}

// AnyMethod implements httplimit.Request: whether the route is
// registered under every method of the app's RequestMethods (app.All).
func (r *request) AnyMethod() bool {
	route := r.Route()
	return route != "" && tableOf(r.c.App(), nil).any[route]
}

func (r *request) Path() string { return r.c.Path() }

func (r *request) Header(name string) string { return r.c.Get(name) }

func (r *request) HeaderValues(name string) []string {
	vs := r.c.Request().Header.PeekAll(name)
	if len(vs) == 0 {
		return nil
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func (r *request) Query(name string) string { return r.c.Query(name) }

// PeerAddr implements httplimit.PeerAddrer: the TCP peer fasthttp holds.
func (r *request) PeerAddr() netip.Addr {
	tcp, ok := r.c.RequestCtx().RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// RemoteAddr is the TCP peer ("ip:port"), never a proxy header.
func (r *request) RemoteAddr() string {
	addr := r.c.RequestCtx().RemoteAddr()
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.AddrPort().String()
	}
	if addr == nil {
		return ""
	}
	return addr.String()
}

// Value looks in c's locals, then in its context.
func (r *request) Value(key any) any {
	if v := r.c.Locals(key); v != nil {
		return v
	}
	return r.c.Context().Value(key)
}

// table is what one app has registered: its routes (not its Use
// registrations) by method in fiber's order, the route values fiber
// hands to handlers, and the patterns registered under every method.
// Immutable once published.
type table struct {
	app      *fiber.App
	cfg      fiber.Config
	own      map[*fiber.Route]bool // every route of the stack: true for a route, false for a Use
	byMethod map[string][]pattern  // routes' patterns, in the stack's order
	any      map[string]bool
}

// tables holds the table of the app last asked about: a process serves
// one app almost always; several take turns (time, never a wrong answer).
var tables atomic.Pointer[table]

// tableOf is app's table, rebuilt when it is another app's or does not
// know rt (a route added since; nil asks for none). rt still unknown
// after a rebuild is recorded as a Use, so it costs one rebuild.
func tableOf(app *fiber.App, rt *fiber.Route) *table {
	if t := tables.Load(); t != nil && t.app == app {
		if _, ok := t.own[rt]; ok || rt == nil {
			return t
		}
	}
	t := buildTable(app)
	if _, ok := t.own[rt]; !ok && rt != nil {
		t.own[rt] = false
	}
	tables.Store(t)
	return t
}

// buildTable reads app's routes through fiber's public API: Stack (every
// registration, by method, in order) and GetRoutes(true) (the same
// registrations without the Use ones, as copies in the same order): a
// registration of the stack is a route when it is the next copy (same
// method, path and handlers).
func buildTable(app *fiber.App) *table {
	t := &table{app: app, cfg: app.Config(), own: map[*fiber.Route]bool{}, byMethod: map[string][]pattern{}, any: map[string]bool{}}
	routes := app.GetRoutes(true)
	j := 0
	methods := map[string]map[string]bool{}
	for _, stack := range app.Stack() {
		for _, rt := range stack {
			if j < len(routes) && sameRoute(rt, &routes[j]) {
				j++
				t.own[rt] = true
				t.byMethod[rt.Method] = append(t.byMethod[rt.Method], pattern{rt.Path, bucketOf(rt.Path, &t.cfg)})
				if methods[rt.Path] == nil {
					methods[rt.Path] = map[string]bool{}
				}
				methods[rt.Path][rt.Method] = true
				continue
			}
			t.own[rt] = false
		}
	}
	for p, ms := range methods {
		all := true
		for _, m := range t.cfg.RequestMethods {
			all = all && ms[m]
		}
		t.any[p] = all && len(t.cfg.RequestMethods) > 0
	}
	return t
}

// pattern is a route's pattern and fiber's bucket for it: fiber's router
// tries a route whose pattern starts with a literal of three bytes or
// more only for paths that start with those three bytes.
type pattern struct {
	path, bucket string
}

// bucketOf is the bucket of a route pattern under cfg: the first three
// bytes of its leading literal (up to the first unescaped ':', '*' or
// '+', escapes removed) as fiber's register prepares it (a leading "/",
// lower case unless CaseSensitive, no trailing slash unless
// StrictRouting), or "" when that literal is shorter.
func bucketOf(p string, cfg *fiber.Config) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	if !cfg.CaseSensitive {
		b := []byte(p) // as fiber's utils.ToLower: ASCII only, byte by byte
		for i, c := range b {
			b[i] = lowerASCII(c)
		}
		p = string(b)
	}
	if !cfg.StrictRouting && len(p) > 1 {
		p = strings.TrimRight(p, "/")
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c == ':' || c == '*' || c == '+') && (i == 0 || p[i-1] != '\\') {
			p = p[:i]
			break
		}
	}
	p = strings.ReplaceAll(p, `\`, "")
	if len(p) < 3 {
		return ""
	}
	return p[:3]
}

// inBucket reports whether fiber's router tries a route of bucket b for
// the detection path detect.
func inBucket(detect, b string, cfg *fiber.Config) bool {
	if b == "" {
		return true
	}
	if len(detect) < 3 {
		return false
	}
	if cfg.CaseSensitive {
		return detect[:3] == b
	}
	for i := 0; i < 3; i++ {
		if lowerASCII(detect[i]) != b[i] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func sameRoute(a, b *fiber.Route) bool {
	if a.Method != b.Method || a.Path != b.Path || len(a.Handlers) != len(b.Handlers) {
		return false
	}
	return len(a.Handlers) == 0 || &a.Handlers[0] == &b.Handlers[0]
}

// matches remembers the route of recent (table, method, path): a client
// path costs the scan of its method's routes once while it stays here.
// Paths are client-chosen, so the memory is a fixed array (a path takes
// a slot's turn; time, never a wrong answer).
var matches [matchSlots]atomic.Pointer[matchEntry]

const matchSlots = 1024

type matchEntry struct {
	t                   *table
	method, path, route string
}

var matchSeed = maphash.MakeSeed()

// match is the pattern of the first route of method whose pattern
// matches path, as fiber's router finds it, or "".
func (t *table) match(method, path string) string {
	var h maphash.Hash
	h.SetSeed(matchSeed)
	h.WriteString(method)
	h.WriteByte(0)
	h.WriteString(path)
	slot := &matches[h.Sum64()%matchSlots]
	if e := slot.Load(); e != nil && e.t == t && e.method == method && e.path == path {
		return e.route
	}
	detect := path
	if !t.cfg.StrictRouting && len(detect) > 1 {
		detect = strings.TrimRight(detect, "/")
		if detect == "" {
			detect = "/"
		}
	}
	route := ""
	for _, p := range t.byMethod[method] {
		if !inBucket(detect, p.bucket, &t.cfg) {
			continue // fiber's router does not try it for this path
		}
		if fiber.RoutePatternMatch(detect, p.path, t.cfg) {
			route = p.path
			break
		}
	}
	// the path is fasthttp's buffer, reused after the request: clone it
	slot.Store(&matchEntry{t: t, method: strings.Clone(method), path: strings.Clone(path), route: route})
	return route
}

// Body implements keyfuncs.BodyRequester: fasthttp holds the body in
// memory, so keyfuncs.FormField reads it without consuming anything (as
// sent: a compressed body is not decoded).
func (r *request) Body() []byte { return r.c.Request().Body() }
