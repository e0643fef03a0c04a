// Package modtest builds Go code as a module of its own against this
// checkout, for the tests that prove the public API is enough: the
// README's and guides' snippets, an adapter and a store written outside
// the module. It is test support, imported only by _test.go files.
package modtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Run writes files (paths relative to the module root, slash-separated)
// into a temporary module named module whose go.mod requires
// github.com/limitkit/limitkit, replaced by the checkout at root, and
// pins root's dependency versions (root's go.sum is copied), then runs
// the go command with each of cmds in it, with the caller's GOPROXY: a
// module only the copied code imports (an example's exporter, say) is
// downloaded into the cache at the versions go.sum pins, as the go
// command would for a user's fresh module. It
// fails t with the command's output at the first command that fails, and
// returns the outputs.
func Run(t testing.TB, root, module string, files map[string]string, cmds ...[]string) []string {
	t.Helper()
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module "+module)
	mod += "\nrequire github.com/limitkit/limitkit v0.0.0\n\nreplace github.com/limitkit/limitkit => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.mod"), mod)
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	for name, content := range files {
		write(t, filepath.Join(dir, filepath.FromSlash(name)), content)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build module %s: %v", module, err)
	}
	var outs []string
	for _, args := range cmds {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in module %s: %v\n%s", strings.Join(args, " "), module, err, out)
		}
		outs = append(outs, string(out))
	}
	return outs
}

// Dir reads every .go file of the directory src
// (not its subdirectories) into a files map for Run, under the same
// names. It fails t when src holds no Go file.
func Dir(t testing.TB, src string) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("%s: no Go files (%v)", src, err)
	}
	files := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = string(b)
	}
	return files
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
