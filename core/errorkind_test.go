package core_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

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

// TestReplyKindLogHint: a store failure of a reply kind is logged with
// its kind and a hint of its own.
func TestReplyKindLogHint(t *testing.T) {
	var buf bytes.Buffer
	st := failingStore{err: fmt.Errorf("redisstore: %w", kindErr(core.ErrorOOM))}
	l := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(1)}},
		core.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	_, _ = l.Allow(context.Background(), "k")
	assert.Contains(t, buf.String(), "kind=oom")
	assert.Contains(t, buf.String(), "raise maxmemory")
}

// failingStore fails every call with err.
type failingStore struct{ err error }

func (s failingStore) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, s.err
}
