package core_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/limitkit/limitkit/core"
)

// kindErr is a store error that knows its kind, as a Redis store's error
// for an error reply does.
type kindErr core.ErrorKind

func (k kindErr) Error() string             { return "reply " + core.ErrorKind(k).String() }
func (k kindErr) ErrorKind() core.ErrorKind { return core.ErrorKind(k) }

// TestClassifyKindError: a KindError anywhere in the chain gives its kind,
// unless the deadline passed or the caller cancelled (the store did not
// answer in time, whatever the last reply was).
func TestClassifyKindError(t *testing.T) {
	seen := map[string]bool{}
	for k := core.ErrorTryAgain; k < core.ErrorOther; k++ {
		err := fmt.Errorf("redisstore: policy %q: %w", "p", kindErr(k))
		assert.Equal(t, k, core.ClassifyError(err))
		s := k.String()
		assert.NotEqual(t, "other", s, "kind %d has no name", k)
		assert.False(t, seen[s], "two kinds named %q", s)
		seen[s] = true
	}
	assert.Equal(t, core.ErrorTimeout, core.ClassifyError(fmt.Errorf("%w %w", kindErr(core.ErrorTryAgain), context.DeadlineExceeded)))
	assert.Equal(t, []string{"tryagain", "clusterdown", "redirect", "readonly", "loading", "oom", "script"},
		[]string{core.ErrorTryAgain.String(), core.ErrorClusterDown.String(), core.ErrorRedirect.String(),
			core.ErrorReadOnly.String(), core.ErrorLoading.String(), core.ErrorOOM.String(), core.ErrorScript.String()})
}
