package limitkit_test

import (
	"bufio"
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/limitkit/limitkit/"

// TestArchitectureImports: the imports ARCHITECTURE.md lists between the
// module's packages are exactly those of the code (test files aside), and
// every package outside internal/ is listed, so the layering it states
// cannot drift from the code (it said keyfuncs imported core, and left
// out core/fleet → core/memstore, metrics → core/memstore and
// rules/serve → nethttp).
func TestArchitectureImports(t *testing.T) {
	doc := documentedImports(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "." {
			return filepath.SkipDir // another module (benchmarks)
		}
		pkg, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) || path == "." {
			return nil
		}
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(path)
		want, listed := doc[rel]
		if !listed {
			if !strings.HasPrefix(rel, "internal/") {
				t.Errorf("ARCHITECTURE.md does not list package %s (imports %v)", rel, moduleImports(pkg))
			}
			return nil
		}
		seen[rel] = true
		if got := moduleImports(pkg); !slices.Equal(got, want) {
			t.Errorf("%s imports %v; ARCHITECTURE.md says %v", rel, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range doc {
		if !seen[p] {
			t.Errorf("ARCHITECTURE.md lists %s, which is not a package of the module", p)
		}
	}
}

// moduleImports is pkg's imports within the module, relative and sorted.
func moduleImports(pkg *build.Package) []string {
	out := []string{}
	for _, imp := range pkg.Imports {
		if rel, ok := strings.CutPrefix(imp, module); ok {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
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
			list := []string{}
			for _, d := range strings.Split(deps, ",") {
				if d = strings.TrimSpace(d); d != "" {
					list = append(list, d)
				}
			}
			slices.Sort(list)
			doc[strings.TrimSpace(pkg)] = list
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
