package httplimit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestExternalAdapter proves that an adapter can be written outside this
// module: testdata/extadapter, a net/http middleware that uses only the
// public API (NewEngine, a keyfuncs.Request view of its own, DecideInto,
// Fields, Reject, AdapterOption), is copied into a temporary module whose
// go.mod replaces github.com/limitkit/limitkit by this checkout and pins
// this module's dependency versions, then vetted and tested — offline
// (GOPROXY=off): the module cache holds everything this repository's own
// tests build. An internal package, or an unexported name, used there
// fails the build.
func TestExternalAdapter(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("testdata", "extadapter")
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil || len(files) < 2 {
		t.Fatalf("testdata/extadapter: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, filepath.Base(f)), b)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module example.com/extadapter")
	mod += "\nrequire github.com/limitkit/limitkit v0.0.0\n\nreplace github.com/limitkit/limitkit => " + root + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), []byte(mod))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), sum)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the external adapter: %v", err)
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s of testdata/extadapter: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s: %s", strings.Join(args, " "), out)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
