package httplimit_test

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdaptersUseThePublicAPI: the module's adapters import no internal
// package (fiberlimit and grpclimit read Fields and the header names from
// internal/respond), so that what they need is what an adapter written
// outside the module has.
func TestAdaptersUseThePublicAPI(t *testing.T) {
	for _, dir := range []string{"nethttp", "ginlimit", "echolimit", "fiberlimit", "grpclimit"} {
		pkg, err := build.ImportDir(filepath.Join("..", dir), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "github.com/limitkit/limitkit/internal/") {
				t.Errorf("%s imports %s: give httplimit the public API it needs", dir, imp)
			}
		}
	}
}
