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
// This file is the default path and reads fiber's public API only:
// app.Stack() and app.GetRoutes(true) (the routes, and which of them are
// Use routes), app.Config() (CaseSensitive, StrictRouting,
// RequestMethods), and fiber.RoutePatternMatch, fiber's own matcher,
// which decides every pattern syntax fiber has (parameters, optional
// parameters, wildcards, constraints, several parameters in a segment,
// escapes). What it adds is fiber's router's order: the request's
// detection path (trailing slashes dropped unless StrictRouting), the
// method's routes in registration order, and fiber's three-byte buckets
// (a route whose leading literal has three bytes or more is tried only
// for paths that start with them). RoutePatternMatch parses its pattern
// on every call, so it allocates per route tried: fastroutes.go holds
// the one trick, a pre-compiled matcher for the common patterns, with
// the benchmark of what it buys beside it; it falls back to this file's
// per-route match for the rest.
//
// The table is built from the app's routes, lazily on the first request
// and again only when the number of routes changes: it never holds
// anything derived from the requests, so a client sending a million
// distinct paths costs a million lookups and no memory.
// route_diff_test.go checks both matchers against fiber's router.

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

type methodRoutes struct {
	method string
	routes []*tableRoute // in registration order
	fast   *fastRoutes   // fastroutes.go's matcher; nil: matchPublic
}

// tableRoute is one route. path is what Route returns for it: the pattern
// as registered (fiber's Route.Path), which c.Route().Path also gives in
// a per-route middleware.
type tableRoute struct {
	path     string
	prepared string // path as fiber's App.register prepares it (see prepare)
	params   int    // len(Route.Params): 0 for a static route
	bucket   string // fiber's tree bucket: the first 3 bytes of the leading literal, or ""
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

// routeCache holds a middleware's table for the app it last served
// (tests; the middleware uses appTables). public builds tables without
// fastroutes.go's matcher.
type routeCache struct {
	t      atomic.Pointer[routeTable]
	public bool
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
				t = buildTable(app, n, true)
				appTables[i].Store(t)
			}
			return t
		}
	}
	t := buildTable(app, n, true)
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
	t := buildTable(app, n, !rc.public)
	rc.t.Store(t)
	return t
}

// buildTable builds app's table; fast adds fastroutes.go's matcher.
func buildTable(app *fiber.App, count int, fast bool) *routeTable {
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
				t.methods = append(t.methods, methodRoutes{method: r.Method})
				mr = &t.methods[len(t.methods)-1]
			}
			tr := &tableRoute{path: r.Path, prepared: t.prepare(r.Path), params: len(r.Params)}
			tr.bucket = leadingLiteralBucket(tr.prepared)
			mr.routes = append(mr.routes, tr)
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
	if fast {
		for i := range t.methods {
			t.methods[i].fast = t.compileFast(t.methods[i].routes)
		}
	}
	return t
}

func (t *routeTable) methodFor(m string) *methodRoutes {
	for i := range t.methods {
		if t.methods[i].method == m {
			return &t.methods[i]
		}
	}
	return nil
}

// prepare is pattern as fiber's App.register prepares it: a leading "/",
// lower case unless CaseSensitive, no trailing slashes unless
// StrictRouting.
func (t *routeTable) prepare(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	if !t.caseSensitive {
		p = string(lowerASCII(nil, p))
	}
	if !t.strict && len(p) > 1 {
		p = strings.TrimRight(p, "/")
	}
	return p
}

// leadingLiteralBucket is fiber's tree bucket of a prepared pattern: the
// first three bytes of its leading literal (up to the
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
	if mr.fast != nil {
		return mr.fast.match(t, det)
	}
	for _, r := range mr.routes {
		if t.routeMatches(r, det) {
			return r.path
		}
	}
	return ""
}

// routeMatches reports whether fiber's router runs r for a request whose
// detection path is det, when no earlier route matched.
func (t *routeTable) routeMatches(r *tableRoute, det string) bool {
	if r.bucket != "" && (len(det) < 3 || !equalLit(det[:3], r.bucket, !t.caseSensitive)) {
		return false // fiber only tries the route for paths in its bucket
	}
	if det == "" { // "//" without StrictRouting: RoutePatternMatch would read "/"
		return r.prepared == "/*"
	}
	// RoutePatternMatch prepares the pattern and lower-cases det itself
	// unless CaseSensitive, as fiber's register and router do
	return fiber.RoutePatternMatch(det, r.path, t.cfg)
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
