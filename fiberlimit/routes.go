package fiberlimit

import (
	"strings"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
)

// A global fiber middleware (app.Use, group.Use) runs before fiber has
// chosen the route that will serve the request: c.Route() is the Use
// route. To key each endpoint separately, as the net/http, gin and echo
// adapters do, the middleware asks a routeTable which route fiber will
// run: the first route of the request's method, in registration order,
// whose pattern matches the request's path (Use routes, which only
// prefix-match, are not endpoints and are skipped). A request that no
// route matches gets the empty ("unmatched") scope, like an unmatched
// request on the other adapters.
//
// The table is built from the app's routes, lazily on the first request
// and again only when the number of routes changes: it never holds
// anything derived from the requests, so a client sending a million
// distinct paths costs a million lookups and no memory.
//
// Patterns made of literal segments, whole-segment parameters (":id"), a
// last optional parameter (":id?") and a last wildcard ("*", "+") are
// matched here without allocating, under fiber's rules (CaseSensitive,
// StrictRouting, UnescapePath, fiber's optional trailing slashes and its
// three-byte route buckets); other patterns (constraints "<int>",
// parameters within a segment ":name.:ext", escapes, wildcards in the
// middle) are matched by fiber's own fiber.RoutePatternMatch, which
// allocates. route_diff_test.go checks the table against fiber's router.

// routeTable is one app's non-Use routes, grouped by method. Immutable.
type routeTable struct {
	id            uint64 // unique among the tables of this process (the key cache's Table)
	app           *fiber.App
	count         int // len of every app.Stack() list when built
	caseSensitive bool
	strict        bool
	cfg           fiber.Config // for fiber.RoutePatternMatch
	methods       []methodRoutes
	// any holds the patterns registered under every method of the app's
	// RequestMethods (app.All): their scope is the route alone.
	any map[string]bool
	// uses are the app's Use routes (see useRoutes); usesMap the same
	// when there are more than fewUses.
	uses    []*fiber.Route
	usesMap map[*fiber.Route]bool
}

// fewUses is the most Use routes looked up by a scan.
const fewUses = 32

// isUse reports whether rt, a route of the table's app, was registered
// with Use (app.Use, group.Use, a mount's): a prefix match that runs
// before the final route is known.
func (t *routeTable) isUse(rt *fiber.Route) bool {
	if t.usesMap != nil {
		return t.usesMap[rt]
	}
	for _, u := range t.uses {
		if u == rt {
			return true
		}
	}
	return false
}

// useRoutes returns the Use routes of app through fiber's public API:
// app.GetRoutes(true) lists the routes of app.Stack() in the same order
// without the Use ones (fiber exports no flag; its Route.Method of a Use
// route is rewritten to the method list's), so walking both lists marks
// every stack route that GetRoutes skipped. A route is the listed one when
// the fields GetRoutes copied are the same: method, path and the very
// same handler and parameter slices. fiber's Use builds its own handler
// slice from its arguments, so no other route shares a Use route's.
// TestUseRoutesMatchesFibersFlag checks the result against fiber's own
// (unexported) flag.
func useRoutes(app *fiber.App) []*fiber.Route {
	listed := app.GetRoutes(true)
	var uses []*fiber.Route
	j := 0
	for _, rs := range app.Stack() {
		for _, r := range rs {
			if j < len(listed) && sameRoute(&listed[j], r) {
				j++
				continue
			}
			uses = append(uses, r)
		}
	}
	return uses
}

func sameRoute(a, b *fiber.Route) bool {
	return a.Method == b.Method && a.Path == b.Path &&
		len(a.Handlers) == len(b.Handlers) && (len(a.Handlers) == 0 || &a.Handlers[0] == &b.Handlers[0]) &&
		len(a.Params) == len(b.Params) && (len(a.Params) == 0 || &a.Params[0] == &b.Params[0])
}

type methodRoutes struct {
	method string
	// static maps the detection path of each parameterless route to the
	// first such route (fiber compares those by equality).
	static map[string]*tableRoute
	// few is static as a list when it has at most fewStatic entries:
	// comparing a handful of strings beats hashing the path.
	few []staticRoute
	// params are the routes with parameters, in registration order.
	params []*tableRoute
	n      int // routes seen while building: the next index
}

// tableRoute is one route. path is what Route returns for it: the pattern
// as registered (fiber's Route.Path), which c.Route().Path also gives in
// a per-route middleware.
type tableRoute struct {
	path   string
	index  int       // position among the method's non-Use routes
	bucket string    // fiber's tree bucket: the first 3 bytes of the leading literal, or ""
	star   bool      // the pattern is "/*": matches every path
	segs   []segment // nil: match with fiber.RoutePatternMatch
	// optTrail: the pattern ends with "/" after a parameter; fiber makes
	// that last slash optional.
	optTrail bool
}

// fewStatic is the most static routes of a method looked up by a scan.
const fewStatic = 8

type staticRoute struct {
	det string
	r   *tableRoute
}

type segKind uint8

const (
	segLit   segKind = iota // literal text (lower-cased unless CaseSensitive)
	segParam                // ":name": one non-empty segment
	segOpt                  // ":name?" (last only): one segment, possibly empty, or none
	segStar                 // "*" (last only): the rest, possibly empty
	segPlus                 // "+" (last only): the rest, not empty
)

type segment struct {
	kind segKind
	lit  string
}

// routeCache holds a middleware's table for the app it last served.
type routeCache struct {
	t atomic.Pointer[routeTable]
}

// appTables holds the tables of the apps whose Use-handler requests were
// resolved most recently, shared by every middleware (and by the key and
// scope functions that ask a request view for its route): finding the
// table is a few loads, where leaving a per-middleware cache in the
// request's user values cost two scans of them per request. At most
// len(appTables) apps are kept (their tables refer to them); a process
// serving more apps through Use middleware at once rebuilds tables as they
// take turns, which costs time, never a wrong route.
var (
	appTables     [8]atomic.Pointer[routeTable]
	appTablesNext atomic.Uint32
)

// appTable returns the table of app, building it when the app is not
// among appTables or its number of routes changed.
func appTable(app *fiber.App) *routeTable {
	n := routeCount(app)
	for i := range appTables {
		t := appTables[i].Load()
		if t == nil {
			break // slots fill in order
		}
		if t.app == app {
			if t.count != n {
				t = buildTable(app, n)
				appTables[i].Store(t)
			}
			return t
		}
	}
	t := buildTable(app, n)
	appTables[(appTablesNext.Add(1)-1)%uint32(len(appTables))].Store(t)
	return t
}

func routeCount(app *fiber.App) int {
	n := 0
	for _, rs := range app.Stack() {
		n += len(rs)
	}
	return n
}

// routeBuilds counts table builds (tests check it does not grow with
// the requests served).
var routeBuilds atomic.Int64

// table returns the table of app, building it when the app or its number
// of routes changed.
func (rc *routeCache) table(app *fiber.App) *routeTable {
	n := routeCount(app)
	if t := rc.t.Load(); t != nil && t.app == app && t.count == n {
		return t
	}
	t := buildTable(app, n)
	rc.t.Store(t)
	return t
}

func buildTable(app *fiber.App, count int) *routeTable {
	cfg := app.Config()
	t := &routeTable{
		id:            uint64(routeBuilds.Add(1)),
		app:           app,
		count:         count,
		caseSensitive: cfg.CaseSensitive,
		strict:        cfg.StrictRouting,
		cfg:           fiber.Config{CaseSensitive: cfg.CaseSensitive, StrictRouting: cfg.StrictRouting},
	}
	methods := cfg.RequestMethods
	if len(methods) == 0 {
		methods = fiber.DefaultMethods
	}
	t.uses = useRoutes(app)
	if len(t.uses) > fewUses {
		t.usesMap = make(map[*fiber.Route]bool, len(t.uses))
		for _, u := range t.uses {
			t.usesMap[u] = true
		}
	}
	perPath := map[string]int{}
	for i, rs := range app.Stack() {
		for _, r := range rs {
			if t.isUse(r) {
				continue
			}
			if perPath[r.Path] == i { // counted once per method list
				perPath[r.Path] = i + 1
			}
			mr := t.methodFor(r.Method)
			if mr == nil {
				t.methods = append(t.methods, methodRoutes{method: r.Method, static: map[string]*tableRoute{}})
				mr = &t.methods[len(t.methods)-1]
			}
			mr.n++
			tr, static := t.compile(r, mr.n)
			if static != "" {
				if _, dup := mr.static[static]; !dup { // the first one serves
					mr.static[static] = tr
				}
				continue
			}
			mr.params = append(mr.params, tr)
		}
	}
	for path, n := range perPath {
		if n == len(methods) && n == len(app.Stack()) {
			if t.any == nil {
				t.any = map[string]bool{}
			}
			t.any[path] = true
		}
	}
	for i := range t.methods {
		mr := &t.methods[i]
		if len(mr.static) <= fewStatic {
			for det, r := range mr.static {
				mr.few = append(mr.few, staticRoute{det, r})
			}
		}
	}
	return t
}

// staticRoute returns the static route whose detection path is det.
func (mr *methodRoutes) staticRoute(det string) *tableRoute {
	if len(mr.static) > fewStatic {
		return mr.static[det]
	}
	for i := range mr.few {
		if len(mr.few[i].det) == len(det) && mr.few[i].det == det {
			return mr.few[i].r
		}
	}
	return nil
}

// staticRouteBytes is staticRoute for a detection path in a buffer: the
// compiler looks a string(b) map key and compares string(b) without
// copying b, so the lowered path costs no allocation and no unsafe.
func (mr *methodRoutes) staticRouteBytes(det []byte) *tableRoute {
	if len(mr.static) > fewStatic {
		return mr.static[string(det)]
	}
	for i := range mr.few {
		if len(mr.few[i].det) == len(det) && mr.few[i].det == string(det) {
			return mr.few[i].r
		}
	}
	return nil
}

func (t *routeTable) methodFor(m string) *methodRoutes {
	for i := range t.methods {
		if t.methods[i].method == m {
			return &t.methods[i]
		}
	}
	return nil
}

// lowerASCII appends s with A-Z lower-cased, as fiber's utils.ToLower
// does (non-ASCII bytes are kept).
func lowerASCII(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// compile turns route r, the idx-th of its method, into a tableRoute.
// For a parameterless route static is its detection path (fiber compares
// those by equality), else "".
func (t *routeTable) compile(r *fiber.Route, idx int) (tr *tableRoute, static string) {
	tr = &tableRoute{path: r.Path, index: idx}
	// fiber's App.register: a leading "/", lower case unless
	// CaseSensitive, no trailing slashes unless StrictRouting
	p := r.Path
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	if !t.caseSensitive {
		p = string(lowerASCII(nil, p))
	}
	if !t.strict && len(p) > 1 {
		p = strings.TrimRight(p, "/")
	}
	if p == "/*" {
		tr.star = true
		return tr, ""
	}
	if len(r.Params) == 0 {
		return tr, strings.ReplaceAll(p, `\`, "") // fiber's RemoveEscapeChar
	}
	tr.bucket = leadingLiteralBucket(p)
	if segs, ok := simpleSegments(p); ok {
		tr.segs = segs
		n := len(segs)
		tr.optTrail = n > 1 && segs[n-1].kind == segLit && segs[n-1].lit == ""
	}
	return tr, ""
}

// leadingLiteralBucket is fiber's tree bucket of a pattern with
// parameters: the first three bytes of its leading literal (up to the
// first unescaped ':', '*' or '+', escapes removed), or "" when that
// literal is shorter.
func leadingLiteralBucket(p string) string {
	end := len(p)
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c == ':' || c == '*' || c == '+') && (i == 0 || p[i-1] != '\\') {
			end = i
			break
		}
	}
	lit := strings.ReplaceAll(p[:end], `\`, "")
	if len(lit) < 3 {
		return ""
	}
	return lit[:3]
}

// simpleSegments splits a prepared pattern into segments when every
// segment is a literal, a whole-segment parameter, or (last) an optional
// parameter or wildcard; ok is false for anything else.
func simpleSegments(p string) ([]segment, bool) {
	parts := strings.Split(p[1:], "/")
	segs := make([]segment, 0, len(parts))
	for i, s := range parts {
		last := i == len(parts)-1
		switch {
		case s == "*" && last:
			segs = append(segs, segment{kind: segStar})
		case s == "+" && last:
			segs = append(segs, segment{kind: segPlus})
		case len(s) > 1 && s[0] == ':':
			name, opt := s[1:], false
			if name[len(name)-1] == '?' {
				name, opt = name[:len(name)-1], true
			}
			if name == "" || !paramName(name) || (opt && !last) {
				return nil, false
			}
			k := segParam
			if opt {
				k = segOpt
			}
			segs = append(segs, segment{kind: k})
		case strings.ContainsAny(s, `:*+\?<>()`):
			return nil, false
		default:
			segs = append(segs, segment{kind: segLit, lit: s})
		}
	}
	return segs, true
}

func paramName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// match returns the pattern of the route fiber runs for method and path
// (c.Path(): unescaped when UnescapePath is set), or "" when none
// matches.
func (t *routeTable) match(method, path string) string {
	mr := t.methodFor(method)
	if mr == nil {
		return ""
	}
	// fiber's detection path: trailing slashes removed unless
	// StrictRouting; lower case is compared by folding.
	det := path
	if !t.strict && len(det) > 1 && det[len(det)-1] == '/' {
		det = strings.TrimRight(det, "/")
	}
	fold := !t.caseSensitive && hasUpper(det)
	var st *tableRoute
	if len(mr.static) > 0 {
		if fold {
			var buf [128]byte
			lb := lowerASCII(buf[:0], det)
			st = mr.staticRouteBytes(lb)
		} else {
			st = mr.staticRoute(det)
		}
	}
	for _, r := range mr.params {
		if st != nil && r.index > st.index {
			break
		}
		if t.routeMatches(r, det, fold) {
			return r.path
		}
	}
	if st != nil {
		return st.path
	}
	return ""
}

func (t *routeTable) routeMatches(r *tableRoute, det string, fold bool) bool {
	if r.star {
		return true
	}
	if r.bucket != "" && (len(det) < 3 || !equalLit(det[:3], r.bucket, fold)) {
		return false // fiber only tries the route for paths in its bucket
	}
	if r.segs == nil { // it lower-cases det itself unless CaseSensitive
		return fiber.RoutePatternMatch(det, r.path, t.cfg)
	}
	return matchSegments(r, det, fold)
}

// matchSegments matches det against a simple pattern.
func matchSegments(r *tableRoute, det string, fold bool) bool {
	rest := det
	for i, s := range r.segs {
		last := i == len(r.segs)-1
		if rest == "" {
			return last && (s.kind == segOpt || s.kind == segStar || r.optTrail)
		}
		if rest[0] != '/' {
			return false
		}
		rest = rest[1:]
		switch s.kind {
		case segStar:
			return true
		case segPlus:
			return rest != ""
		}
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			j = len(rest)
		}
		part := rest[:j]
		switch s.kind {
		case segLit:
			if !equalLit(part, s.lit, fold) {
				return false
			}
		case segParam:
			if part == "" {
				return false
			}
		}
		rest = rest[j:]
	}
	return rest == ""
}

// equalLit reports whether s equals lit (already lower case when fold),
// folding ASCII upper case in s when fold is set.
func equalLit(s, lit string, fold bool) bool {
	if len(s) != len(lit) {
		return false
	}
	if !fold {
		return s == lit
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lit[i] {
			return false
		}
	}
	return true
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
