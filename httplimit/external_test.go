package httplimit_test

import (
	"path/filepath"
	"testing"

	"github.com/limitkit/limitkit/internal/modtest"
)

// TestExternalAdapter proves that an adapter can be written outside this
// module: testdata/extadapter, a net/http middleware that uses only the
// public API (NewAdapterEngine, an httplimit.Request view of its own, Decide,
// Fields, Reject, AdapterOption), is built as a module of its own against
// this checkout, vetted and tested, offline. An internal package or an
// unexported name used there fails the build.
func TestExternalAdapter(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := modtest.Dir(t, filepath.Join("testdata", "extadapter"))
	out := modtest.Run(t, root, "example.com/extadapter", files,
		[]string{"vet", "./..."}, []string{"test", "-count=1", "./..."})
	t.Log(out)
}
