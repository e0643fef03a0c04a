package readme

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippet is one ```go block of README.md.
type snippet struct {
	line int    // README line of the first line of code
	vars string // the "snippet vars" comment's declarations, or ""
	code string
}

var fence = regexp.MustCompile("(?ms)(?:^<!-- snippet vars: ([^\n]*?) -->\n)?^```go\n(.*?)^```")

func snippets(t *testing.T, md string) []snippet {
	t.Helper()
	var out []snippet
	for _, m := range fence.FindAllStringSubmatchIndex(md, -1) {
		s := snippet{code: md[m[4]:m[5]]}
		if m[2] >= 0 {
			s.vars = md[m[2]:m[3]]
		}
		s.line = strings.Count(md[:m[4]], "\n") + 1
		out = append(out, s)
	}
	return out
}

// source renders snippet s as the file of package pkg. //line directives
// make the compiler report README.md positions.
func (s snippet) source(pkg string) string {
	if strings.HasPrefix(s.code, "package ") {
		return fmt.Sprintf("//line README.md:%d\n%s", s.line, s.code)
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
		fmt.Fprintf(&b, "\n//line README.md:%d\n%s", s.line, s.code)
	} else {
		fmt.Fprintf(&b, "\nfunc snippet() {\n//line README.md:%d\n%s}\n", s.line, s.code)
	}
	return b.String()
}

// TestREADMESnippetsCompile writes every Go snippet of README.md into one
// temporary module (a package per snippet) whose go.mod replaces
// github.com/limitkit/limitkit by this checkout and pins the same
// dependency versions, then vets it — offline (GOPROXY=off):
// the module cache already holds everything this repository's own tests
// build. Whole programs must also be gofmt-formatted.
func TestREADMESnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ss := snippets(t, string(md))
	if len(ss) < 10 {
		t.Fatalf("found %d Go snippets in README.md; the fence pattern is broken", len(ss))
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module limitkit.test/readme")
	mod += "\nrequire github.com/limitkit/limitkit v0.0.0\n\nreplace github.com/limitkit/limitkit => " + root + "\n"
	write(t, filepath.Join(dir, "go.mod"), mod)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	programs := 0
	for i, s := range ss {
		pkg := fmt.Sprintf("s%02d", i)
		if strings.HasPrefix(s.code, "package ") {
			programs++
			if f, err := format.Source([]byte(s.code)); err != nil || !bytes.Equal(f, []byte(s.code)) {
				t.Errorf("README.md:%d: the program is not gofmt-formatted (%v)", s.line, err)
			}
		}
		write(t, filepath.Join(dir, pkg, pkg+".go"), s.source(pkg))
	}
	if programs != 5 {
		t.Errorf("README.md has %d whole programs, want the 5 quick starts", programs)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the snippets: %v", err)
	}
	// vet type-checks every package as the compiler does (an unused
	// variable, a wrong type, a missing import fail it) without linking
	// four programs
	for _, args := range [][]string{{"vet", "./..."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s of the README snippets: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
