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
	for _, dir := range []string{"nethttp", "ginlimit", "echolimit", "fiberlimit", "grpclimit", "echo5limit", "fiber3limit", "connectlimit"} {
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

// TestEngineKnowsNoStore: httplimit, and every package of the module it
// imports, import core and none of its stores (core/memstore,
// core/redisstore, core/fleet): the engine decides through
// core.Limiter.AllowNAt whatever the store, so that a store written
// outside the module gets the same path.
func TestEngineKnowsNoStore(t *testing.T) {
	const mod = "github.com/limitkit/limitkit/"
	seen := map[string]bool{}
	var visit func(path, from string)
	visit = func(path, from string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if strings.HasPrefix(path, mod+"core/") {
			t.Errorf("%s imports %s: the engine must depend on core only", from, path)
			return
		}
		pkg, err := build.ImportDir(filepath.Join("..", strings.TrimPrefix(path, mod)), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, mod) {
				visit(imp, path)
			}
		}
	}
	visit(mod+"httplimit", "")
	if !seen[mod+"core"] {
		t.Fatalf("the walk did not reach core: %v", seen)
	}
}
