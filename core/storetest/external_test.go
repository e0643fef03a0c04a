package storetest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitkit/limitkit/internal/modtest"
)

// TestExternalStore proves that the conformance suites run against stores
// written outside this module, with only the public API: each module of
// testdata is built as a module of its own against this checkout and its
// TestConformance is run, offline.
//
//   - extstore decides with core's own Decide (Options.CoreDecides: no
//     differential) and runs Run.
//   - ownmath does its own arithmetic for single-limit GCRA and
//     fixed-window policies: it runs Run with its differential, RunVerbs,
//     RunVerbsDifferential and RunRegistry, and the output must show those
//     subtests passing for the policies it decides itself, so that the
//     outside run keeps proving that a store's own arithmetic is checked.
func TestExternalStore(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module string
		ran    []string // subtests that must have passed
	}{
		{"extstore", []string{"TestConformance/ExactUnderConcurrency", "TestConformance/HostileKeys"}},
		{"ownmath", []string{
			"TestConformance/Run/Differential/gcra", "TestConformance/Run/Differential/gcra-burst",
			"TestConformance/Run/Differential/fw", "TestConformance/Run/Differential/gcra-counted",
			"TestConformance/Run/Differential/fw-counted", "TestConformance/Run/Differential/fw-shadow",
			"TestConformance/Verbs/verbs-gcra", "TestConformance/Verbs/verbs-fixed_window",
			"TestConformance/VerbsDifferential/gcra", "TestConformance/VerbsDifferential/fw-counted",
			"TestConformance/VerbsDifferential/verbs-gcra", "TestConformance/VerbsDifferential/verbs-fixed_window",
			"TestConformance/Registry/ReplacingTakesTheNameOver",
		}},
	} {
		t.Run(tc.module, func(t *testing.T) {
			t.Parallel() // two go commands in their own directories
			files := modtest.Dir(t, filepath.Join("testdata", tc.module))
			out := modtest.Run(t, root, "example.com/"+tc.module, files,
				[]string{"vet", "./..."}, []string{"test", "-count=1", "-v", "-run", "TestConformance", "./..."})
			for _, name := range tc.ran {
				if !strings.Contains(out[1], "--- PASS: "+name+" (") {
					t.Errorf("the run of testdata/%s has no passing %s", tc.module, name)
				}
			}
			if t.Failed() {
				t.Log(out[1])
			}
		})
	}
}
