package adaptertest

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionsIdentical guards the promise that the four adapters take the
// same options under the same names: their options.go files may differ in
// the package clause only.
func TestOptionsIdentical(t *testing.T) {
	pkgClause := regexp.MustCompile(`(?m)^package \w+$`)
	for _, file := range []string{"options.go", "policies.go"} {
		var first string
		for _, p := range []string{"nethttp", "ginlimit", "echolimit", "fiberlimit"} {
			b, err := os.ReadFile("../../" + p + "/" + file)
			require.NoError(t, err)
			s := pkgClause.ReplaceAllString(string(b), "package X")
			if first == "" {
				first = s
				continue
			}
			assert.Equal(t, first, s, "%s/%s differs from nethttp's", p, file)
		}
	}
}
