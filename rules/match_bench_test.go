package rules

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkMatchManyRules matches against a file of n rules, one route
// each, in two shapes: "/v<i>/{id}" (distinct first segments, as
// manyRules writes them) and "/api/r<i>/{id}" (one first segment for
// all, every other rule for GET only), for the last rule (every rule
// before it is tried) and for a path no rule matches. The file builds on
// commit 2a2a789 too, whose figures issue 40 compares: copy it there
// and run both in one go on the same machine.
func BenchmarkMatchManyRules(b *testing.B) {
	for _, shape := range []string{"distinct", "shared"} {
		for _, n := range []int{4000, 61000} {
			var data strings.Builder
			data.WriteString("rules:\n")
			last := ""
			for i := range n {
				route, methods := fmt.Sprintf("/v%d/{id}", i), ""
				if shape == "shared" {
					route = fmt.Sprintf("/api/r%d/{id}", i)
					if i%2 == 0 {
						methods = ", methods: [GET]"
					}
				}
				fmt.Fprintf(&data, "- {name: r%d, route: %q, limits: [1/m]%s}\n", i, route, methods)
				last = strings.Replace(route, "{id}", "7", 1)
			}
			s, err := parse([]byte(data.String()), syntaxYAML)
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range []struct{ name, path string }{{"last", last}, {"miss", "/api/nothing/here"}} {
				b.Run(fmt.Sprintf("%s/%d/%s", shape, n, c.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if r := s.Match("GET", c.path, false); (r == nil) != (c.name == "miss") {
							b.Fatal("wrong match")
						}
					}
				})
			}
		}
	}
}
