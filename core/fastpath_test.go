package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/benchalt"
)

// localMapStore is mapStore declaring itself local: Limiters take their
// fast path (no deadline, no observer) over it.
type localMapStore struct{ *mapStore }

func (localMapStore) Local() bool { return true }

// A local store without an observer takes the fast path; with an observer
// the full one. Both decide alike, step by step, for every algorithm,
// multi-limit policies, counted denials and costs 0..3 (and the fast path
// hands a negative cost to the full one: ErrInvalidCost).
func TestFastPathDecidesAsTheFullPath(t *testing.T) {
	algs := []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}
	for _, a := range algs {
		for _, p := range []core.Policy{
			{Name: "one", Algorithm: a, Limits: []core.Limit{core.Per(3, time.Second)}},
			{Name: "two", Algorithm: a, CountDenied: true, Limits: []core.Limit{core.Per(5, 10*time.Second), core.Per(2, time.Second)}},
		} {
			t.Run(a.String()+"/"+p.Name, func(t *testing.T) {
				clock := core.NewManualClock(time.Unix(1_767_000_000, 0))
				var events int
				fast, err := core.NewLimiter(localMapStore{newMapStore()}, p, core.WithClock(clock))
				require.NoError(t, err)
				full, err := core.NewLimiter(localMapStore{newMapStore()}, p, core.WithClock(clock),
					core.WithObserver(core.ObserverFunc(func(core.Event) { events++ })))
				require.NoError(t, err)
				ctx := context.Background()
				for i := range 60 {
					cost := int64(i % 4)
					if i == 7 {
						cost = -1
					}
					df, ef := fast.AllowN(ctx, "k", cost)
					ds, es := full.AllowN(ctx, "k", cost)
					require.Equal(t, ds, df, "step %d", i)
					require.Equal(t, es, ef, "step %d", i)
					df, ef = fast.AllowNAt(ctx, "j", clock.Now(), cost)
					ds, es = full.AllowNAt(ctx, "j", clock.Now(), cost)
					require.Equal(t, ds, df, "step %d (At)", i)
					require.Equal(t, es, ef, "step %d (At)", i)
					clock.Advance(time.Duration(i%5) * 150 * time.Millisecond)
				}
				assert.Equal(t, 118, events, "the observed limiter saw every decision but the two negative costs")
			})
		}
	}
}

// A failing local store on the fast path gets the fail mode and a
// *StoreError, as on the full path.
func TestFastPathStoreFailure(t *testing.T) {
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed} {
		st := localMapStore{newMapStore()}
		st.err = errors.New("boom")
		l, err := core.NewLimiter(st, core.Policy{Name: "p", FailMode: mode, Limits: []core.Limit{core.PerMinute(2)}})
		require.NoError(t, err)
		d, err := l.Allow(context.Background(), "k")
		var se *core.StoreError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, mode, se.Mode)
		assert.True(t, d.Degraded)
		assert.Equal(t, mode == core.FailOpen, d.Allowed, "%v", mode)
	}
}

// allowNThroughAt is AllowN as one code path would write it: the clock's
// Now, then AllowNAt (not inlined, as a method of that size is not).
//
//go:noinline
func allowNThroughAt(l *core.Limiter, ctx context.Context, key string, cost int64) (core.Decision, error) {
	return l.AllowNAt(ctx, key, l.Clock().Now(), cost)
}

// BenchmarkHotKeyWrittenOut decides for one hot GCRA key on the embedded
// store in two ways, alternately (chunks in the same run): AllowN as it
// is (the default clock read without an interface call, then the one
// decision path), and allowNThroughAt (the clock through the Clock
// interface, then AllowNAt). The median per-round difference
// ns:through-AllowN is what reading the default clock directly saves.
func BenchmarkHotKeyWrittenOut(b *testing.B) {
	p := core.Policy{Name: "hot", Limits: []core.Limit{core.Per(1<<30, 30*24*time.Hour)}}
	st := mustMem()
	defer st.Close()
	l, err := core.NewLimiter(st, p)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	allowed := func(d core.Decision, _ error) {
		if !d.Allowed {
			b.Fatal("denied")
		}
	}
	ways := []func(){
		func() { allowed(l.AllowN(ctx, "user:42", 1)) },
		func() { allowed(allowNThroughAt(l, ctx, "user:42", 1)) },
	}
	benchalt.Ways(b, 1000, []string{"AllowN", "through"}, ways)
}

// TestOneDecisionPathInstants: AllowN decides at the Limiter's clock's
// instant and AllowNAt at its argument's, on the fast path (a local
// store) and the full one (an observer), and a key's state is the same
// whichever verb charged it: the one path reads the clock only for
// AllowN.
func TestOneDecisionPathInstants(t *testing.T) {
	p := core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(1, time.Minute)}}
	for _, observed := range []bool{false, true} {
		clock := core.NewManualClock(time.Unix(1_767_000_000, 0))
		var opts []core.Option
		if observed {
			opts = append(opts, core.WithObserver(core.ObserverFunc(func(core.Event) {})))
		}
		l, err := core.NewLimiter(localMapStore{newMapStore()}, p, append(opts, core.WithClock(clock))...)
		require.NoError(t, err)
		ctx := context.Background()
		d, err := l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, d.Allowed, "observed %v", observed)
		d, err = l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "observed %v: the window's one request is spent", observed)
		// an instant a window later: AllowNAt decides there, not at the clock's
		d, err = l.AllowNAt(ctx, "k", clock.Now().Add(time.Minute), 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "observed %v: AllowNAt at the next window", observed)
		d, err = l.Allow(ctx, "j")
		require.NoError(t, err)
		assert.True(t, d.Allowed, "observed %v", observed)
		d, err = l.AllowNAt(ctx, "j", clock.Now(), 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "observed %v: Allow charged the window AllowNAt decides in", observed)
	}
}
