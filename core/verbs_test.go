package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// countingStore counts the calls a Limiter makes to the embedded store.
type countingStore struct {
	fullMem
	calls atomic.Int64
}

func (s *countingStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	s.calls.Add(1)
	return s.fullMem.Take(ctx, key, p, now, cost)
}

func (s *countingStore) Reserve(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64, maxWait time.Duration) (core.Decision, error) {
	s.calls.Add(1)
	return s.fullMem.Reserve(ctx, key, p, now, cost, maxWait)
}

// waitFixture is a limiter on a counting embedded store with a manual
// clock, and WaitN's sleep replaced by one that records each wait and,
// when advance is set, moves the clock by it.
type waitFixture struct {
	l      *core.Limiter
	st     *countingStore
	clk    *core.ManualClock
	slept  []time.Duration
	sleepE error
}

func newWaitFixture(t *testing.T, p core.Policy, advance bool) *waitFixture {
	f := &waitFixture{clk: core.NewManualClock(time.Unix(1_767_000_000, 0))}
	f.st = &countingStore{fullMem: mustMem()}
	t.Cleanup(func() { f.st.Close() })
	f.l = core.MustNewLimiter(f.st, p, core.WithClock(f.clk))
	t.Cleanup(core.SetSleep(func(_ context.Context, d time.Duration) error {
		f.slept = append(f.slept, d)
		if len(f.slept) > 100 {
			return errors.New("waitFixture: more than 100 sleeps")
		}
		if f.sleepE != nil {
			return f.sleepE
		}
		if advance {
			f.clk.Advance(d)
		}
		return nil
	}))
	return f
}

func TestWaitReservesOneCallPerAdmission(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket} {
		f := newWaitFixture(t, core.Policy{Name: "w", Algorithm: alg, Limits: []core.Limit{core.PerSecond(10)}}, false)
		for range 10 {
			require.NoError(t, f.l.Wait(ctx, "k"))
		}
		require.Empty(t, f.slept, "%s: the quota admits at once", alg)
		// three waiters queue: each is given its turn in the one call
		for range 3 {
			require.NoError(t, f.l.Wait(ctx, "k"))
		}
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}, f.slept, "%s", alg)
		assert.Equal(t, int64(13), f.st.calls.Load(), "%s: one store call per admission", alg)
		// the turns are taken: at 300 ms nothing is left
		f.clk.Advance(300 * time.Millisecond)
		d, err := f.l.PeekN(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "%s", alg)
		assert.Equal(t, 100*time.Millisecond, d.RetryAfter, "%s", alg)
	}
}

func TestWaitWindowSleepsUntilRetryAfter(t *testing.T) {
	ctx := context.Background()
	f := newWaitFixture(t, core.Policy{Name: "w", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerSecond(2)}}, true)
	require.NoError(t, f.l.Wait(ctx, "k"))
	require.NoError(t, f.l.Wait(ctx, "k"))
	require.NoError(t, f.l.Wait(ctx, "k")) // waits for the next window
	require.Len(t, f.slept, 1)
	assert.GreaterOrEqual(t, f.slept[0], time.Second)
	assert.LessOrEqual(t, f.slept[0], time.Second+time.Second/16, "jitter at most 1/16 of the wait")
	assert.Equal(t, int64(4), f.st.calls.Load(), "one denied call, then the admission")
}

func TestWaitErrors(t *testing.T) {
	ctx := context.Background()
	f := newWaitFixture(t, core.Policy{Name: "w", Algorithm: core.GCRA, Limits: []core.Limit{core.PerSecond(10)}}, false)
	require.ErrorIs(t, f.l.WaitN(ctx, "k", 11), core.ErrNeverAdmitted)
	require.ErrorIs(t, f.l.WaitN(ctx, "k", -1), core.ErrInvalidCost)
	require.NoError(t, f.l.WaitN(ctx, "k", 10))

	// x/time/rate's rule: a wait beyond the deadline returns at once and
	// reserves nothing
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, f.l.Wait(dctx, "k"), core.ErrWaitExceedsDeadline)
	assert.Empty(t, f.slept)
	d, err := f.l.PeekN(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, 100*time.Millisecond, d.RetryAfter, "nothing reserved")

	// a reservation whose wait is cancelled is refunded
	f.sleepE = context.Canceled
	require.ErrorIs(t, f.l.Wait(ctx, "k"), context.Canceled)
	d, err = f.l.PeekN(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, 100*time.Millisecond, d.RetryAfter, "the cancelled turn was handed back")

	cctx, cancel2 := context.WithCancel(ctx)
	cancel2()
	require.ErrorIs(t, f.l.Wait(cctx, "k"), context.Canceled)
}

// plainStore is a Store without the verbs.
type plainStore struct{ core.Store }

func TestVerbsUnsupportedStore(t *testing.T) {
	ctx := context.Background()
	ms := mustMem()
	defer ms.Close()
	l := core.MustNewLimiter(plainStore{ms}, core.Policy{Name: "u", Limits: []core.Limit{core.PerSecond(1)}})
	_, err := l.PeekN(ctx, "k", 1)
	require.ErrorIs(t, err, core.ErrUnsupported)
	assert.Contains(t, err.Error(), "Peek")
	require.ErrorIs(t, l.Reset(ctx, "k"), core.ErrUnsupported)
	_, err = l.Charge(ctx, "k", 1)
	require.ErrorIs(t, err, core.ErrUnsupported)
	_, err = l.Refund(ctx, "k", 1)
	require.ErrorIs(t, err, core.ErrUnsupported)
	require.NoError(t, l.Wait(ctx, "k"), "Wait needs only Take")
}

func TestVerbsThroughLimiter(t *testing.T) {
	ctx := context.Background()
	ms := mustMem()
	defer ms.Close()
	var kinds []core.EventKind
	obs := core.ObserverFunc(func(e core.Event) { kinds = append(kinds, e.Kind) })
	clk := core.NewManualClock(time.Unix(1_767_000_000, 0))
	l := core.MustNewLimiter(ms, core.Policy{Name: "v", Limits: []core.Limit{core.PerMinute(10)}}, core.WithClock(clk), core.WithObserver(obs))

	d, err := l.Charge(ctx, "k", 15) // 15 used of 10: owes 5
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, 36*time.Second, d.RetryAfter, "the 5 owed and 1 more refill at 6 s each")
	d, err = l.PeekN(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, d.Allowed, "an exhausted key peeks denied")
	assert.Equal(t, []core.EventKind{core.EventVerb, core.EventVerb}, kinds, "a charge and a peek are verbs, not decisions")

	d, err = l.Refund(ctx, "k", 6)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(1), d.Remaining)

	require.NoError(t, l.Reset(ctx, "k"))
	d, err = l.PeekN(ctx, "k", 10)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "a reset key has its full quota")
	assert.Equal(t, int64(0), d.Remaining)

	for _, f := range []func() error{
		func() error { _, err := l.PeekN(ctx, "k", -1); return err },
		func() error { _, err := l.Charge(ctx, "k", -1); return err },
		func() error { _, err := l.Refund(ctx, "k", -1); return err },
	} {
		require.ErrorIs(t, f(), core.ErrInvalidCost)
	}
	d, err = l.Charge(ctx, "k", 1<<62)
	require.NoError(t, err)
	assert.Equal(t, 66*time.Second, d.RetryAfter, "a huge charge owes at most one full quota")
}

// failingVerbs is a remote VerbStore whose every call fails.
type failingVerbs struct{ err error }

func (f failingVerbs) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, f.err
}
func (f failingVerbs) Peek(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, f.err
}
func (f failingVerbs) Reset(context.Context, string, *core.Policy) error { return f.err }
func (f failingVerbs) Charge(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, f.err
}
func (f failingVerbs) Credit(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, f.err
}

func TestVerbStoreFailure(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	l := core.MustNewLimiter(failingVerbs{boom}, core.Policy{Name: "f", Limits: []core.Limit{core.PerSecond(1)}, FailMode: core.FailClosed}, core.WithLogger(nil))
	var se *core.StoreError
	d, err := l.PeekN(ctx, "k", 1)
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, boom)
	assert.True(t, d.Degraded)
	assert.False(t, d.Allowed)
	require.ErrorAs(t, l.Reset(ctx, "k"), &se)
	_, err = l.Charge(ctx, "k", 1)
	require.ErrorAs(t, err, &se)
	_, err = l.Refund(ctx, "k", 1)
	require.ErrorAs(t, err, &se)
	require.ErrorAs(t, l.Wait(ctx, "k"), &se, "a fail-closed store failure ends the wait")
}

// blockingVerbs is a remote VerbStore and ReserveStore whose every call
// blocks until its context ends.
type blockingVerbs struct{}

func (blockingVerbs) Take(ctx context.Context, _ string, _ *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	<-ctx.Done()
	return core.Decision{}, ctx.Err()
}
func (b blockingVerbs) Peek(ctx context.Context, k string, p *core.Policy, now time.Time, c int64) (core.Decision, error) {
	return b.Take(ctx, k, p, now, c)
}
func (b blockingVerbs) Reset(ctx context.Context, k string, p *core.Policy) error {
	_, err := b.Take(ctx, k, p, time.Time{}, 0)
	return err
}
func (b blockingVerbs) Charge(ctx context.Context, k string, p *core.Policy, now time.Time, c int64) (core.Decision, error) {
	return b.Take(ctx, k, p, now, c)
}
func (b blockingVerbs) Credit(ctx context.Context, k string, p *core.Policy, now time.Time, c int64) (core.Decision, error) {
	return b.Take(ctx, k, p, now, c)
}
func (b blockingVerbs) Reserve(ctx context.Context, k string, p *core.Policy, now time.Time, c int64, _ time.Duration) (core.Decision, error) {
	return b.Take(ctx, k, p, now, c)
}

// TestVerbsCallerDone: a verb whose caller cancelled (before the call or
// while the store is out) or whose own deadline passed is not a store
// failure: nothing is logged at INFO or above and the error is
// core.ErrCallerDone (Wait returns the context's error and admits
// nothing, even under FailOpen); the Limiter's own store deadline is a
// failure, logged at ERROR.
func TestVerbsCallerDone(t *testing.T) {
	verbs := map[string]func(context.Context, *core.Limiter) error{
		"peek":   func(ctx context.Context, l *core.Limiter) error { _, err := l.PeekN(ctx, "k", 1); return err },
		"charge": func(ctx context.Context, l *core.Limiter) error { _, err := l.Charge(ctx, "k", 1); return err },
		"refund": func(ctx context.Context, l *core.Limiter) error { _, err := l.Refund(ctx, "k", 1); return err },
		"reset":  func(ctx context.Context, l *core.Limiter) error { return l.Reset(ctx, "k") },
		"wait":   func(ctx context.Context, l *core.Limiter) error { return l.Wait(ctx, "k") },
	}
	ctxs := map[string]func() (context.Context, context.CancelFunc){
		"already cancelled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		"cancelled during the call": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Millisecond, cancel)
			return ctx, cancel
		},
		"caller deadline": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Millisecond)
		},
	}
	p := core.Policy{Name: "cd", Limits: []core.Limit{core.PerMinute(10)}} // FailOpen
	for vn, verb := range verbs {
		for cn, mk := range ctxs {
			t.Run(vn+"/"+cn, func(t *testing.T) {
				var buf syncBuffer
				l := core.MustNewLimiter(blockingVerbs{}, p, core.WithTimeout(time.Hour), core.WithLogger(textLogger(&buf)))
				ctx, cancel := mk()
				defer cancel()
				err := verb(ctx, l)
				require.Error(t, err, "a cancelled verb never succeeds")
				if vn == "wait" {
					require.ErrorIs(t, err, ctx.Err())
				} else {
					require.ErrorIs(t, err, core.ErrCallerDone)
					assert.Equal(t, "canceled", core.ClassifyError(err))
				}
				assert.Empty(t, buf.String(), "nothing logged at INFO or above")
			})
		}
		t.Run(vn+"/store deadline", func(t *testing.T) {
			var buf syncBuffer
			l := core.MustNewLimiter(blockingVerbs{}, core.Policy{Name: "cd", FailMode: core.FailClosed, Limits: p.Limits},
				core.WithTimeout(time.Millisecond), core.WithLogger(textLogger(&buf)))
			err := verb(context.Background(), l)
			require.Error(t, err)
			require.NotErrorIs(t, err, core.ErrCallerDone)
			assert.Contains(t, buf.String(), "level=ERROR")
			assert.Contains(t, buf.String(), "kind=timeout")
		})
	}
}

// TestWaitHorizonIsTheTightestLimits: a waiter turned away because the
// reservation queue is full sleeps until its turn comes within the
// queue of the policy's tightest limit (one full quota's refill of the
// limit that refills fastest: 1 s for 10/s here), not of its loosest
// (1 h for 20/h), so that it comes back while it can still reserve.
func TestWaitHorizonIsTheTightestLimits(t *testing.T) {
	ctx := context.Background()
	p := core.Policy{Name: "w", Algorithm: core.GCRA, Limits: []core.Limit{core.PerSecond(10), core.Per(20, time.Hour)}}
	f := newWaitFixture(t, p, false)
	// 10 admitted at once, then reservations (one sleep each, the clock
	// standing still) until the 10/s queue is full and a Wait is turned
	// away: WaitN then sleeps, asks again, is turned away again...
	errStop := errors.New("stop")
	var slept []time.Duration
	t.Cleanup(core.SetSleep(func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		if len(slept) > 40 {
			return errStop
		}
		return nil
	}))
	var err error
	for range 40 {
		if err = f.l.Wait(ctx, "k"); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, errStop, "a Wait was turned away and slept until stopped")
	d, err := f.l.PeekN(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Greater(t, d.RetryAfter, time.Second, "the turn lies beyond the 10/s queue")
	// ...each time for RetryAfter less the tightest limit's queue (1 s),
	// plus a jitter of at most 5 ms
	last := slept[len(slept)-1]
	assert.GreaterOrEqual(t, last, d.RetryAfter-time.Second, "slept %v for a turn %v away", last, d.RetryAfter)
	assert.LessOrEqual(t, last, d.RetryAfter-time.Second+5*time.Millisecond, "slept %v for a turn %v away", last, d.RetryAfter)
}
