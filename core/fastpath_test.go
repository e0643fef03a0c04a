package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// localMapStore is mapStore declaring itself local: Limiters take their
// fast path (no deadline, no observer) over it.
type localMapStore struct{ *mapStore }

func (localMapStore) Local() bool { return true }

func TestDefaultClockIsCoarse(t *testing.T) {
	l, err := core.NewLimiter(newMapStore(), core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(2)}})
	require.NoError(t, err)
	assert.Equal(t, core.CoarseClock{}, l.Clock())
}

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

// DirectStore is the store exactly when the Limiter's answer is the
// store's own decision: a local store, no observer, no elastic policy.
func TestDirectStore(t *testing.T) {
	p := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(2)}}
	local := localMapStore{newMapStore()}
	l, err := core.NewLimiter(local, p)
	require.NoError(t, err)
	assert.Equal(t, core.Store(local), l.DirectStore())

	l, err = core.NewLimiter(local, p, core.WithObserver(core.ObserverFunc(func(core.Event) {})))
	require.NoError(t, err)
	assert.Nil(t, l.DirectStore(), "an observer must see every decision")

	l, err = core.NewLimiter(newMapStore(), p)
	require.NoError(t, err)
	assert.Nil(t, l.DirectStore(), "a store that does I/O gets a deadline per call")

	ms := memstore.MustNew()
	defer ms.Close()
	l, err = core.NewLimiter(ms, p)
	require.NoError(t, err)
	assert.Same(t, ms, l.DirectStore())
	l, err = core.NewLimiter(ms, elasticFixed(signalFunc(func(context.Context, int64) (bool, error) { return true, nil })))
	require.NoError(t, err)
	assert.Nil(t, l.DirectStore(), "an elastic policy asks the capacity signal after a denial")
}
