package rules

import "strings"

// node is a trie of the rules' route patterns, one level per path
// segment: Match follows a path's segments down the literal child of
// each (a map lookup) and the parameter child, and considers only the
// rules whose pattern ends on the way, instead of trying every rule in
// turn (at tens of thousands of rules, a scan read every rule's
// hundreds of bytes per request: BenchmarkMatchManyRules). The index
// only narrows the candidates: the rule chosen is the one the scan in
// precedence order would choose (TestMatchIndexAgreesWithScan).
type node struct {
	lit   map[string]*node // children by literal segment; nil when none
	param *node            // child by a parameter segment; nil when none
	// exact and prefix hold the positions in Set.order (ascending: most
	// specific first) of the rules whose pattern ends at this node:
	// exact for a path that ends here too, prefix (a pattern ending in
	// "/*") for a path that goes on with "/".
	exact, prefix []int
}

// buildIndex returns the trie of rules' patterns, order being the
// rules' precedence order (indexes into rules).
func buildIndex(rules []Rule, order []int) *node {
	root := &node{}
	for pos, i := range order {
		n := root
		for _, sg := range rules[i].pat.segs {
			n = n.child(sg)
		}
		if rules[i].pat.prefix {
			n.prefix = append(n.prefix, pos)
		} else {
			n.exact = append(n.exact, pos)
		}
	}
	return root
}

// child returns n's child for sg, adding it when missing.
func (n *node) child(sg segment) *node {
	if sg.param {
		if n.param == nil {
			n.param = &node{}
		}
		return n.param
	}
	c := n.lit[sg.lit]
	if c == nil {
		if n.lit == nil {
			n.lit = map[string]*node{}
		}
		c = &node{}
		n.lit[sg.lit] = c
	}
	return c
}

// matching is one Match call's walk of the trie: best is the least
// position in Set.order of a rule found so far that matches the
// request's identity and method (len(order) when none).
type matching struct {
	s      *Set
	method string
	auth   bool
	best   int
}

// walk visits n, having consumed the path's segments up to the "/"
// that precedes rest.
func (m *matching) walk(n *node, rest string) {
	m.pick(n.prefix) // the path goes on after a "/": "/api/*" matches "/api/" and "/api/x"
	seg, tail, more := strings.Cut(rest, "/")
	if c := n.lit[seg]; c != nil {
		m.step(c, tail, more)
	}
	if n.param != nil && seg != "" {
		m.step(n.param, tail, more)
	}
}

// step moves to n, child for the path's segment before tail: the path
// ends there (more false) or goes on with tail.
func (m *matching) step(n *node, tail string, more bool) {
	if more {
		m.walk(n, tail)
	} else {
		m.pick(n.exact)
	}
}

// pick takes the first rule of list (ascending positions) that applies
// to the request's identity and method, if it comes before best.
func (m *matching) pick(list []int) {
	for _, pos := range list {
		if pos >= m.best {
			return
		}
		r := &m.s.rules[m.s.order[pos]]
		if r.id.matches(m.auth) && r.matchesMethod(m.method) {
			m.best = pos
			return
		}
	}
}
