package storetest_test

import (
	"path/filepath"
	"testing"

	"github.com/limitkit/limitkit/internal/modtest"
)

// TestExternalStore proves that the conformance suite runs against a
// store written outside this module: testdata/extstore, a core.Store
// that uses only the public API, is built as a module of its own against
// this checkout and its test (storetest.Run) is run, offline.
func TestExternalStore(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files := modtest.Dir(t, filepath.Join("testdata", "extstore"))
	out := modtest.Run(t, root, "example.com/extstore", files,
		[]string{"vet", "./..."}, []string{"test", "-count=1", "-v", "-run", "TestConformance", "./..."})
	t.Log(out)
}
