package fiberlimit

import "strings"

// This file holds fiberlimit's one framework trick: a pre-compiled
// matcher for the route patterns apps mostly use, in place of
// routes.go's default, fiber.RoutePatternMatch, which parses the pattern
// again on every call and so allocates per route tried. It re-states
// fiber v2's routing rules for:
//
//   - static patterns (no parameters): compared by equality of the
//     detection path, as fiber's router does, through a map (or a scan of
//     at most fewStatic), the first registration winning; an upper-case
//     path is lowered into a stack buffer and looked up as string(buf),
//     which Go does without a copy;
//   - literal segments, whole-segment parameters (":id"), a last
//     optional parameter (":id?"), a last wildcard ("*", "+") and "/*",
//     under CaseSensitive, StrictRouting and fiber's optional slash after
//     a last parameter, within fiber's three-byte buckets.
//
// Any other pattern (constraints ":id<int>", several parameters in one
// segment ":name.:ext", escapes, wildcards or optional parameters in the
// middle) is left to routes.go's routeMatches, at its place in the
// registration order. route_diff_test.go checks this matcher and the
// default one against fiber's router on the same corpus;
// BenchmarkRouteMatch (fastroutes_test.go) measures what this one buys.

// fastRoutes is one method's routes, compiled. Immutable.
type fastRoutes struct {
	// static maps the detection path of each parameterless route to the
	// first such route (fiber compares those by equality).
	static map[string]fastRoute
	// few is static as a list when it has at most fewStatic entries:
	// comparing a handful of strings beats hashing the path.
	few []staticRoute
	// params are the routes with parameters, in registration order.
	params []fastRoute
}

// fastRoute is a route of its method: index is its position among the
// method's routes.
type fastRoute struct {
	r     *tableRoute
	index int
	star  bool      // the pattern is "/*": matches every path
	segs  []segment // nil: routes.go's routeMatches decides
	// optTrail: the pattern ends with "/" after a parameter; fiber makes
	// that last slash optional.
	optTrail bool
}

// fewStatic is the most static routes of a method looked up by a scan.
const fewStatic = 8

type staticRoute struct {
	det string
	r   fastRoute
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

// compileFast compiles one method's routes (in registration order).
func (t *routeTable) compileFast(routes []*tableRoute) *fastRoutes {
	f := &fastRoutes{static: map[string]fastRoute{}}
	for i, r := range routes {
		fr := fastRoute{r: r, index: i}
		p := r.prepared
		switch {
		case p == "/*":
			fr.star = true
		case r.params == 0:
			det := strings.ReplaceAll(p, `\`, "") // fiber's RemoveEscapeChar
			if _, dup := f.static[det]; !dup {    // the first one serves
				f.static[det] = fr
			}
			continue
		default:
			if segs, ok := simpleSegments(p); ok {
				fr.segs = segs
				n := len(segs)
				fr.optTrail = n > 1 && segs[n-1].kind == segLit && segs[n-1].lit == ""
			}
		}
		f.params = append(f.params, fr)
	}
	if len(f.static) <= fewStatic {
		for det, r := range f.static {
			f.few = append(f.few, staticRoute{det, r})
		}
	}
	return f
}

// staticRoute returns the static route whose detection path is det.
func (f *fastRoutes) staticRoute(det string) (fastRoute, bool) {
	if len(f.static) > fewStatic {
		r, ok := f.static[det]
		return r, ok
	}
	for i := range f.few {
		if len(f.few[i].det) == len(det) && f.few[i].det == det {
			return f.few[i].r, true
		}
	}
	return fastRoute{}, false
}

// staticRouteBytes is staticRoute for a detection path in a buffer: the
// compiler looks a string(b) map key and compares string(b) without
// copying b, so the lowered path costs no allocation and no unsafe.
func (f *fastRoutes) staticRouteBytes(det []byte) (fastRoute, bool) {
	if len(f.static) > fewStatic {
		r, ok := f.static[string(det)]
		return r, ok
	}
	for i := range f.few {
		if len(f.few[i].det) == len(det) && f.few[i].det == string(det) {
			return f.few[i].r, true
		}
	}
	return fastRoute{}, false
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

// match is routeTable.match for the detection path det.
func (f *fastRoutes) match(t *routeTable, det string) string {
	fold := !t.caseSensitive && hasUpper(det)
	var st fastRoute
	found := false
	if len(f.static) > 0 {
		if fold {
			var buf [128]byte
			st, found = f.staticRouteBytes(lowerASCII(buf[:0], det))
		} else {
			st, found = f.staticRoute(det)
		}
	}
	for i := range f.params {
		r := &f.params[i]
		if found && r.index > st.index {
			break
		}
		if r.matches(t, det, fold) {
			return r.r.path
		}
	}
	if found {
		return st.r.path
	}
	return ""
}

func (r *fastRoute) matches(t *routeTable, det string, fold bool) bool {
	if r.star {
		return true
	}
	if r.segs == nil {
		return t.routeMatches(r.r, det)
	}
	if b := r.r.bucket; b != "" && (len(det) < 3 || !equalLit(det[:3], b, fold)) {
		return false // fiber only tries the route for paths in its bucket
	}
	return matchSegments(r, det, fold)
}

// matchSegments matches det against a simple pattern.
func matchSegments(r *fastRoute, det string, fold bool) bool {
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

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
