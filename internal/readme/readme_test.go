package readme

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/limitkit/limitkit/internal/modtest"
)

// snippet is one ```go block of README.md or a docs/*.md guide.
type snippet struct {
	file string // the Markdown file, relative to the repository root
	line int    // line in file of the first line of code
	vars string // the "snippet vars" comment's declarations, or ""
	code string
	skip string // the "snippet not compiled" comment's reason, or ""
}

var fence = regexp.MustCompile("(?ms)(?:^<!-- snippet (vars|not compiled): ([^\n]*?) -->\n)?^```go\n(.*?)^```")

func snippets(t *testing.T, file, md string) []snippet {
	t.Helper()
	var out []snippet
	for _, m := range fence.FindAllStringSubmatchIndex(md, -1) {
		s := snippet{file: file, code: md[m[6]:m[7]]}
		if m[2] >= 0 {
			if md[m[2]:m[3]] == "vars" {
				s.vars = md[m[4]:m[5]]
			} else {
				s.skip = strings.TrimSpace(md[m[4]:m[5]])
			}
		}
		s.line = strings.Count(md[:m[6]], "\n") + 1
		out = append(out, s)
	}
	return out
}

// source renders snippet s as the file of package pkg. //line directives
// make the compiler report positions in the Markdown file.
func (s snippet) source(pkg string) string {
	if strings.HasPrefix(s.code, "package ") {
		return fmt.Sprintf("//line %s:%d\n%s", s.file, s.line, s.code)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\nimport (\n", pkg)
	for _, imp := range FragmentImports {
		fmt.Fprintf(&b, "\t%q\n", imp[0])
	}
	b.WriteString(")\n\n")
	for _, imp := range FragmentImports {
		fmt.Fprintf(&b, "var _ = %s\n", imp[1])
	}
	for _, v := range strings.Split(s.vars, ";") {
		if v = strings.TrimSpace(v); v != "" {
			fmt.Fprintf(&b, "var %s\n", v)
		}
	}
	if strings.HasPrefix(s.code, "var ") {
		fmt.Fprintf(&b, "\n//line %s:%d\n%s", s.file, s.line, s.code)
	} else {
		fmt.Fprintf(&b, "\nfunc snippet() {\n//line %s:%d\n%s}\n", s.file, s.line, s.code)
	}
	return b.String()
}

// markdownFiles are README.md and every docs/*.md guide, relative to
// root: the files whose Go snippets must compile. A guide added to docs/
// is covered without a change here.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, g := range guides {
		rel, err := filepath.Rel(root, g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// TestREADMESnippetsCompile writes every Go snippet of README.md and of
// the docs/*.md guides into one temporary module (a package per snippet)
// whose go.mod replaces github.com/limitkit/limitkit by this checkout and
// pins the same dependency versions, then vets it — offline
// (GOPROXY=off): the module cache already holds everything this
// repository's own tests build. Errors name the Markdown file and line.
// Whole programs must also be gofmt-formatted; README.md holds exactly the
// quick starts' whole programs.
func TestREADMESnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var ss []snippet
	perFile := map[string]int{}
	for _, f := range markdownFiles(t, root) {
		md, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		got := snippets(t, f, string(md))
		perFile[f] = len(got)
		ss = append(ss, got...)
	}
	if len(ss) < 15 || perFile["README.md"] < 5 || perFile["docs/recipes.md"] < 4 {
		t.Fatalf("found Go snippets %v; the fence pattern is broken", perFile)
	}
	files := map[string]string{}
	programs, skipped := 0, 0
	for i, s := range ss {
		if s.skip != "" {
			skipped++
			if len(s.skip) < 10 {
				t.Errorf("%s:%d: a snippet left out must say why (%q)", s.file, s.line, s.skip)
			}
			continue
		}
		pkg := fmt.Sprintf("s%02d", i)
		if strings.HasPrefix(s.code, "package ") {
			if s.file == "README.md" {
				programs++
			}
			if f, err := format.Source([]byte(s.code)); err != nil || !bytes.Equal(f, []byte(s.code)) {
				t.Errorf("%s:%d: the program is not gofmt-formatted (%v)", s.file, s.line, err)
			}
		}
		files[pkg+"/"+pkg+".go"] = s.source(pkg)
	}
	if programs != 8 {
		t.Errorf("README.md has %d whole programs, want the 8 quick starts (net/http, gin, echo v4 and v5, fiber v2 and v3, gRPC, Connect)", programs)
	}
	// vet type-checks every package as the compiler does (an unused
	// variable, a wrong type, a missing import fail it) without linking
	// the programs
	modtest.Run(t, root, "limitkit.test/readme", files, []string{"vet", "./..."})
	t.Logf("%d snippets compiled, %d left out with a reason", len(files), skipped)
}

// compiledElsewhere marks a snippet whose code is compiled in the
// benchmarks module (it needs a peer library this module does not
// require).
const compiledElsewhere = "compiled in benchmarks/migrating_test.go"

// TestMigratingSnippetsCompiled (issue 37): docs/migrating.md's "before"
// snippets use peer libraries, so the main module cannot compile them;
// each one marked "compiled in benchmarks/migrating_test.go" must appear
// there verbatim (indentation aside), where .ci/run's go vet of the
// benchmarks module compiles it.
func TestMigratingSnippetsCompiled(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "docs", "migrating.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "benchmarks", "migrating_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	dedent := func(s string) string {
		var b strings.Builder
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimLeft(l, "\t"); l != "" {
				b.WriteString(l + "\n")
			}
		}
		return b.String()
	}
	code := dedent(string(src))
	n := 0
	for _, s := range snippets(t, "docs/migrating.md", string(md)) {
		if !strings.HasPrefix(s.skip, compiledElsewhere) {
			continue
		}
		n++
		if !strings.Contains(code, dedent(s.code)) {
			t.Errorf("docs/migrating.md:%d: the snippet is not in benchmarks/migrating_test.go as written:\n%s", s.line, s.code)
		}
	}
	if n < 4 {
		t.Errorf("docs/migrating.md: %d snippets marked %q; want one per peer (4)", n, compiledElsewhere)
	}
}
