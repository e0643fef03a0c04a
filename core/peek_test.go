package core_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestPeekReportsExhaustedKeyDenied (issue 22, item 7): AllowN(ctx, key,
// 0) used to say Allowed true for an exhausted key; cost 0 is a peek in
// AllowN and in Check alike, consumes nothing, and goes to the observer
// as an EventPeek, not as an allowed decision.
func TestPeekReportsExhaustedKeyDenied(t *testing.T) {
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		for _, observed := range []bool{false, true} {
			name := alg.String()
			if observed {
				name += "/observed"
			}
			t.Run(name, func(t *testing.T) {
				s := mustMem()
				defer s.Close()
				clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
				var kinds []core.EventKind
				opts := []core.Option{core.WithClock(clock)}
				if observed {
					opts = append(opts, core.WithObserver(core.ObserverFunc(func(e core.Event) { kinds = append(kinds, e.Kind) })))
				}
				l := core.MustNewLimiter(s, core.Policy{Name: "p", Algorithm: alg, Limits: []core.Limit{core.PerMinute(2)}}, opts...)
				ctx := context.Background()
				d, err := l.AllowN(ctx, "k", 0)
				require.NoError(t, err)
				assert.True(t, d.Allowed, "a fresh key has room")
				assert.Equal(t, int64(2), d.Remaining)
				for range 2 {
					d, err = l.Allow(ctx, "k")
					require.NoError(t, err)
					require.True(t, d.Allowed, "the peek consumed nothing")
				}
				for _, peek := range []func() (core.Decision, error){
					func() (core.Decision, error) { return l.AllowN(ctx, "k", 0) },
					func() (core.Decision, error) { return l.AllowNAt(ctx, "k", clock.Now(), 0) },
					func() (core.Decision, error) { return core.AllowAll(ctx, core.Check{Limiter: l, Key: "k"}) },
				} {
					d, err = peek()
					require.NoError(t, err)
					assert.False(t, d.Allowed, "an exhausted key: a peek says denied")
					assert.Positive(t, d.RetryAfter)
					assert.LessOrEqual(t, d.RetryAfter, 2*time.Minute, "at most ResetAfter")
				}
				if observed {
					assert.Equal(t, []core.EventKind{core.EventVerb, core.EventDecision, core.EventDecision, core.EventVerb, core.EventVerb, core.EventVerb}, kinds)
				}
			})
		}
	}
}

// TestPeekShadow: a shadow policy never denies; its peek of an exhausted
// key says so with Shadowed.
func TestPeekShadow(t *testing.T) {
	s := mustMem()
	defer s.Close()
	l := core.MustNewLimiter(s, core.Policy{Name: "p", Shadow: true, Limits: []core.Limit{core.PerMinute(1)}})
	ctx := context.Background()
	_, err := l.Allow(ctx, "k")
	require.NoError(t, err)
	d, err := l.AllowN(ctx, "k", 0)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.True(t, d.Shadowed)
}

// TestCallerDoneIsNotAStoreFailure (issue 22, item 7): the caller's own
// cancelled or expired context used to be logged at ERROR as a store
// timeout with a hint that blamed the store. It is logged at DEBUG with
// kind canceled; the store's own deadline still logs an ERROR timeout.
func TestCallerDoneIsNotAStoreFailure(t *testing.T) {
	policy := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(10)}}
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Millisecond, cancel)
			return ctx, cancel
		}},
		{"caller deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Millisecond)
		}},
		{"already done", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncBuffer
			logger := textLogger(&buf)
			l := core.MustNewLimiter(&mapStore{block: true}, policy, core.WithTimeout(time.Hour), core.WithLogger(logger))
			ctx, cancel := tc.ctx()
			defer cancel()
			d, err := l.Allow(ctx, "k")
			require.Error(t, err)
			assert.True(t, d.Degraded)
			assert.ErrorIs(t, err, core.ErrCallerDone)
			assert.Equal(t, "canceled", core.ClassifyError(err))
			var se *core.StoreError
			require.True(t, errors.As(err, &se))
			assert.False(t, core.ClassifyError(se) == "timeout")
			assert.Empty(t, buf.String(), "nothing at INFO and above")

			var dbg syncBuffer
			l = core.MustNewLimiter(&mapStore{block: true}, policy, core.WithTimeout(time.Hour),
				core.WithLogger(slogDebug(&dbg)))
			ctx2, cancel2 := tc.ctx()
			defer cancel2()
			_, _ = l.Allow(ctx2, "k")
			assert.Contains(t, dbg.String(), "level=DEBUG")
			assert.Contains(t, dbg.String(), "kind=canceled")
			assert.NotContains(t, dbg.String(), "hint=")
		})
	}
	t.Run("store error while cancelled", func(t *testing.T) {
		s := mustMem()
		l := core.MustNewLimiter(s, policy, core.WithLogger(nil))
		s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := l.Allow(ctx, "k")
		assert.ErrorIs(t, err, core.ErrClosed)
		assert.NotErrorIs(t, err, core.ErrCallerDone, "the store's own failure")
	})
	t.Run("store deadline", func(t *testing.T) {
		var buf syncBuffer
		l := core.MustNewLimiter(&mapStore{block: true}, policy, core.WithTimeout(time.Millisecond), core.WithLogger(textLogger(&buf)))
		_, err := l.Allow(context.Background(), "k")
		require.Error(t, err)
		assert.NotErrorIs(t, err, core.ErrCallerDone)
		assert.Contains(t, buf.String(), "level=ERROR")
		assert.Contains(t, buf.String(), "kind=timeout")
	})
	t.Run("AllowAll's shared deadline", func(t *testing.T) {
		var buf syncBuffer
		a := core.MustNewLimiter(&mapStore{block: true}, policy, core.WithTimeout(time.Millisecond), core.WithLogger(textLogger(&buf)))
		b := core.MustNewLimiter(&mapStore{block: true}, core.Policy{Name: "q", Limits: policy.Limits}, core.WithTimeout(time.Millisecond), core.WithLogger(textLogger(&buf)))
		_, err := core.AllowAll(context.Background(), core.Check{Limiter: a, Key: "k", Cost: 1}, core.Check{Limiter: b, Key: "k", Cost: 1})
		require.Error(t, err)
		assert.NotErrorIs(t, err, core.ErrCallerDone, "the store's slowness, not the caller's")
		assert.Contains(t, buf.String(), "kind=timeout")
	})
}

// slogDebug is textLogger at level DEBUG.
func slogDebug(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
