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
type kindErr string

func (k kindErr) Error() string     { return "reply " + string(k) }
func (k kindErr) ErrorKind() string { return string(k) }

// TestClassifyKindError: an error with an ErrorKind method anywhere in
// the chain gives its kind, when it is one of the reply kinds
// ClassifyError documents (else "other"), unless the deadline passed or
// the caller cancelled (the store did not answer in time, whatever the
// last reply was).
func TestClassifyKindError(t *testing.T) {
	for _, k := range []string{"tryagain", "clusterdown", "redirect", "readonly", "loading", "oom", "script"} {
		err := fmt.Errorf("redisstore: policy %q: %w", "p", kindErr(k))
		assert.Equal(t, k, core.ClassifyError(err))
	}
	assert.Equal(t, "other", core.ClassifyError(kindErr("bogus")), "a kind ClassifyError does not document")
	assert.Equal(t, "other", core.ClassifyError(kindErr("")), "an empty kind is no nil error")
	assert.Equal(t, "timeout", core.ClassifyError(fmt.Errorf("%w %w", kindErr("tryagain"), context.DeadlineExceeded)))
}

// TestReplyKindLogHint: a store failure of a reply kind is logged with
// its kind and a hint of its own.
func TestReplyKindLogHint(t *testing.T) {
	var buf bytes.Buffer
	st := failingStore{err: fmt.Errorf("redisstore: %w", kindErr("oom"))}
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
