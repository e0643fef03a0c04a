package limitkit_test

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/limitkit/limitkit/"

// TestArchitectureImports: the imports ARCHITECTURE.md lists between the
// module's packages are exactly those of the code, for every package of
// the module: internal/ and _examples/ included, every non-test .go file
// whatever its build constraints (a file built only on one OS imports as
// much as any other). Only test files (_test.go) are left out, and the
// directories of other modules (benchmarks, the testdata modules that
// play an outside author), which are not this module's packages. So the
// layering the document states cannot drift from the code (it said
// keyfuncs imported core, left out core/fleet → core/memstore, metrics →
// core/memstore and rules/serve → nethttp, and passed while the internal
// packages and the examples were not listed at all).
func TestArchitectureImports(t *testing.T) {
	doc := documentedImports(t)
	graph := moduleGraph(t)
	for _, pkg := range sortedKeys(graph) {
		want, listed := doc[pkg]
		if !listed {
			t.Errorf("ARCHITECTURE.md does not list package %s (imports %v)", pkg, graph[pkg])
			continue
		}
		if got := graph[pkg]; !slices.Equal(got, want) {
			t.Errorf("%s imports %v; ARCHITECTURE.md says %v", pkg, got, want)
		}
	}
	for _, p := range sortedKeys(doc) {
		if _, ok := graph[p]; !ok {
			t.Errorf("ARCHITECTURE.md lists %s, which is not a package of the module", p)
		}
	}
}

// TestNoUpwardImport: the module's top-level directories (core with its
// stores, keyfuncs, httplimit, each adapter, rules with rules/serve,
// metrics, otellimit, internal, _examples), joined by the imports of their
// non-test files, form no cycle, so that they stack in floors with every
// import pointing down. A cycle is an import that runs back up: e.g.
// httplimit importing internal/respond while internal/adaptertest imports
// httplimit puts internal both above and below httplimit. Test files are
// left out (a store's test may import a harness above it).
func TestNoUpwardImport(t *testing.T) {
	graph := moduleGraph(t)
	rooms := map[string]map[string][]string{} // room -> room -> the package imports that join them
	for pkg, deps := range graph {
		from := room(pkg)
		for _, dep := range deps {
			if to := room(dep); to != from {
				if rooms[from] == nil {
					rooms[from] = map[string][]string{}
				}
				rooms[from][to] = append(rooms[from][to], pkg+" -> "+dep)
			}
		}
	}
	for _, cycle := range cycles(rooms) {
		why := []string{}
		for i, r := range cycle {
			next := cycle[(i+1)%len(cycle)]
			imps := rooms[r][next]
			slices.Sort(imps)
			why = append(why, strings.Join(imps, ", "))
		}
		t.Errorf("the directories %s import each other in a cycle (an import runs back up): %s",
			strings.Join(cycle, " -> ")+" -> "+cycle[0], strings.Join(why, "; "))
	}
	for _, scc := range components(rooms) {
		t.Errorf("directories in one cycle of imports: %s", strings.Join(scc, ", "))
	}
}

// room is the top-level directory a package belongs to ("." for the root).
func room(pkg string) string {
	r, _, _ := strings.Cut(pkg, "/")
	return r
}

// components returns the strongly connected components of more than one
// node of g (the nodes of each that reach one another), each sorted, in a
// stable order.
func components(g map[string]map[string][]string) [][]string {
	nodes := map[string]bool{}
	for a, m := range g {
		nodes[a] = true
		for b := range m {
			nodes[b] = true
		}
	}
	// Tarjan's strongly connected components.
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var sccs [][]string
	n := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(g[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 {
				sccs = append(sccs, scc)
			}
		}
	}
	for _, v := range sortedKeys(nodes) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	for _, scc := range sccs {
		slices.Sort(scc)
	}
	slices.SortFunc(sccs, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return sccs
}

// cycles returns one cycle per component of [components], each starting
// at the component's smallest node.
func cycles(g map[string]map[string][]string) [][]string {
	var out [][]string
	for _, scc := range components(g) {
		in := map[string]bool{}
		for _, v := range scc {
			in[v] = true
		}
		out = append(out, cycleWithin(g, in, scc[0]))
	}
	return out
}

// cycleWithin is a shortest cycle through start inside the component in
// (a breadth-first search back to start).
func cycleWithin(g map[string]map[string][]string, in map[string]bool, start string) []string {
	prev := map[string]string{}
	queue := []string{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range sortedKeys(g[v]) {
			if !in[w] {
				continue
			}
			if w == start {
				path := []string{v}
				for path[0] != start {
					path = append([]string{prev[path[0]]}, path...)
				}
				return path
			}
			if _, seen := prev[w]; !seen {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []string{start}
}

// moduleGraph is every package of the module (relative path, "." for the
// root) and the module packages its non-test files import, sorted. It
// parses the files itself, so no build constraint hides an import.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir // .git, .ci
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != "." {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(p))
		deps := graph[pkg]
		if deps == nil {
			deps = []string{}
		}
		for _, imp := range f.Imports {
			ip, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if rel, ok := strings.CutPrefix(ip, module); ok && !slices.Contains(deps, rel) {
				deps = append(deps, path.Clean(rel))
			}
		}
		slices.Sort(deps)
		graph[pkg] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".", "core", "rules/serve", "internal/redistest", "_examples/exampleapp"} {
		if _, ok := graph[want]; !ok {
			t.Fatalf("the walk missed package %s: %v", want, sortedKeys(graph))
		}
	}
	return graph
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// documentedImports reads ARCHITECTURE.md's imports block: one line per
// package, "pkg -> dep, dep".
func documentedImports(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```imports":
			in = true
		case in && line == "```":
			in = false
		case in:
			pkg, deps, ok := strings.Cut(line, "->")
			if !ok {
				t.Fatalf("ARCHITECTURE.md imports block: %q is not \"pkg -> dep, dep\"", line)
			}
			pkg = strings.TrimSpace(pkg)
			if _, dup := doc[pkg]; dup {
				t.Fatalf("ARCHITECTURE.md imports block lists %s twice", pkg)
			}
			list := []string{}
			for _, d := range strings.Split(deps, ",") {
				if d = strings.TrimSpace(d); d != "" {
					list = append(list, d)
				}
			}
			slices.Sort(list)
			doc[pkg] = list
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(doc) == 0 {
		t.Fatal("ARCHITECTURE.md has no ```imports block")
	}
	return doc
}

// TestCyclesOfRooms: the cycle finder of TestNoUpwardImport reports a
// cycle exactly when the rooms have one, and names it.
func TestCyclesOfRooms(t *testing.T) {
	edge := func(pairs ...string) map[string]map[string][]string {
		g := map[string]map[string][]string{}
		for i := 0; i < len(pairs); i += 2 {
			if g[pairs[i]] == nil {
				g[pairs[i]] = map[string][]string{}
			}
			g[pairs[i]][pairs[i+1]] = []string{pairs[i] + "/x -> " + pairs[i+1]}
		}
		return g
	}
	layered := edge("nethttp", "httplimit", "httplimit", "core", "httplimit", "keyfuncs", "rules", "core", "internal", "core")
	if got := components(layered); len(got) != 0 {
		t.Errorf("a layered graph: components %v, want none", got)
	}
	up := edge("nethttp", "httplimit", "httplimit", "internal", "internal", "nethttp", "core", "internal", "rules", "core")
	want := [][]string{{"httplimit", "internal", "nethttp"}}
	if got := components(up); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("components %v, want %v", got, want)
	}
	if got := cycles(up); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("cycles %v, want %v", got, want)
	}
}
