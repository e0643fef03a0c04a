package rules

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scanMatch is Match as a scan of every rule in precedence order: the
// definition the index must agree with.
func scanMatch(s *Set, method, path string, authenticated bool) *Rule {
	for _, i := range s.order {
		r := &s.rules[i]
		if r.id.matches(authenticated) && r.matchesMethod(method) && r.pat.match(path) {
			return r
		}
	}
	return nil
}

// TestMatchIndexAgreesWithScan: over random sets of rules (literal,
// parameter and wildcard segments, identities, methods) and random paths
// (empty segments, trailing slashes, no leading slash), Match through the
// index returns the rule the scan in precedence order returns.
func TestMatchIndexAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 4))
	segs := []string{"a", "b", "ab", "{p}", ":q"}
	pathSegs := []string{"a", "b", "ab", "", "c"}
	methods := [][]string{nil, {"GET"}, {"POST"}, {"GET", "DELETE"}}
	for round := 0; round < 300; round++ {
		var rules []Rule
		for i := range 1 + rng.IntN(30) {
			var b strings.Builder
			for range rng.IntN(4) {
				b.WriteString("/" + segs[rng.IntN(len(segs))])
			}
			route := b.String()
			switch {
			case route == "" || rng.IntN(3) == 0:
				route += "/*"
			case rng.IntN(8) == 0:
				route += "/" // a trailing empty segment
			}
			pat, err := compilePattern(route)
			require.NoError(t, err, route)
			rules = append(rules, Rule{Name: route, Route: route, Index: i, pat: pat,
				id: identity(rng.IntN(3)), Methods: methods[rng.IntN(len(methods))]})
		}
		s := &Set{rules: rules, order: precedenceOrder(rules)}
		s.index = buildIndex(s.rules, s.order)
		for range 200 {
			var b strings.Builder
			if rng.IntN(20) > 0 {
				for range 1 + rng.IntN(4) {
					b.WriteString("/" + pathSegs[rng.IntN(len(pathSegs))])
				}
			} else if rng.IntN(2) == 0 {
				b.WriteString("a/b")
			}
			path := b.String()
			method := []string{"GET", "HEAD", "POST", "DELETE"}[rng.IntN(4)]
			auth := rng.IntN(2) == 0
			want, got := scanMatch(s, method, path, auth), s.Match(method, path, auth)
			require.Same(t, want, got, "round %d: %s %q auth=%v: want %v, got %v", round, method, path, auth, name(want), name(got))
		}
	}
}

func name(r *Rule) string {
	if r == nil {
		return "<nil>"
	}
	return r.Route
}
