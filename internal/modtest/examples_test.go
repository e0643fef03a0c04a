package modtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitkit/limitkit/internal/modtest"
)

// TestExamplesBuildAlone proves that each program under _examples/ can
// be copied into a module of its own: the files of its folder (not its
// tests, which may use this module's test helpers; its embedded files,
// such as the gRPC example's rules.yaml, included), alone in a fresh
// module that requires github.com/limitkit/limitkit (replaced by this
// checkout), build offline with `go build ./...`. An example that imports
// an internal/ package of limitkit, or a file of another folder, fails
// here. _examples/exampleapp is the examples' shared wiring, a package
// they import like any other of the module's. The first program that
// imports exampleapp is built alone (parallel subtests start when this
// function returns): it compiles what the programs share (exampleapp and
// limitkit's packages, without -race, so not cached by the tests' own
// builds), which concurrent go commands on a cold cache would each
// compile again. The others are parallel subtests (each in its own
// directory, sharing the build cache): a build then spends most of its
// time linking, on one core.
func TestExamplesBuildAlone(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(root, "_examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n, warmed := 0, false
	for _, dir := range dirs {
		name := filepath.Base(dir)
		files := programFiles(t, dir)
		if name == "exampleapp" || files == nil {
			continue
		}
		n++
		alone := !warmed && importsExampleApp(files)
		warmed = warmed || alone
		t.Run(name, func(t *testing.T) {
			if !alone {
				t.Parallel()
			}
			modtest.Run(t, root, "example.com/copied/"+name, files, []string{"build", "./..."})
		})
	}
	if n < 8 {
		t.Fatalf("found %d example programs under %s, want the 8 documented in _examples/README.md", n, filepath.Join(root, "_examples"))
	}
}

// importsExampleApp reports whether a program's files import
// _examples/exampleapp.
func importsExampleApp(files map[string]string) bool {
	for _, content := range files {
		if strings.Contains(content, `"github.com/limitkit/limitkit/_examples/exampleapp"`) {
			return true
		}
	}
	return false
}

// programFiles reads the files of dir that a user copies to run its
// program: every regular file but the tests; nil when dir holds no Go
// file or no main package (the Dockerfile's folder, the shared package).
func programFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // not a folder
	}
	files := map[string]string{}
	isMain := false
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
		if strings.HasSuffix(name, ".go") && (strings.HasPrefix(string(b), "package main\n") || strings.Contains(string(b), "\npackage main\n")) {
			isMain = true
		}
	}
	if !isMain {
		return nil
	}
	return files
}
