package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

type signalFunc func(ctx context.Context, cost int64) (bool, error)

func (f signalFunc) Acquire(ctx context.Context, cost int64) (bool, error) { return f(ctx, cost) }

// failingElastic is the embedded store whose elastic take fails.
type failingElastic struct{ fullMem }

func (failingElastic) TakeElastic(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, errors.New("elastic take failed")
}

func elasticFixed(sig core.CapacitySignal) core.Policy {
	return core.Policy{Name: "el", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(2)},
		Elastic: &core.Elastic{CeilingPercent: 200, Signal: sig}}
}

// TestElasticNeedsElasticStore: an elastic policy on a store that cannot
// decide it is a construction error naming the store.
func TestElasticNeedsElasticStore(t *testing.T) {
	_, err := core.NewLimiter(newMapStore(), elasticFixed(signalFunc(func(context.Context, int64) (bool, error) { return true, nil })))
	require.ErrorContains(t, err, "elastic throttling needs a store that implements storekit.ElasticStore")
	require.ErrorContains(t, err, "*core_test.mapStore")
}

// TestElasticFailuresAreHard: a signal error, or a failing elastic take,
// leaves the hard decision (and no error: the nominal decision is sound);
// the signal sees the request's cost; a signal is not asked for a request
// within the limit.
func TestElasticFailuresAreHard(t *testing.T) {
	ctx := context.Background()
	clock := core.WithClock(core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	asked := 0
	var costs []int64
	sigErr := signalFunc(func(_ context.Context, cost int64) (bool, error) {
		asked++
		costs = append(costs, cost)
		return true, errors.New("signal down")
	})
	s := mustMem()
	defer s.Close()
	l, err := core.NewLimiter(s, elasticFixed(sigErr), clock)
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		d, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Zero(t, asked, "not asked within the limit")
	d, err := l.AllowN(ctx, "k", 2)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.False(t, d.ElasticRoom)
	require.Equal(t, []int64{2}, costs)

	ok := signalFunc(func(context.Context, int64) (bool, error) { return true, nil })
	s2 := mustMem()
	defer s2.Close()
	l, err = core.NewLimiter(failingElastic{s2}, elasticFixed(ok), clock)
	require.NoError(t, err)
	l.Allow(ctx, "k")
	l.Allow(ctx, "k")
	d, err = l.Allow(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, core.Decision{Limit: core.PerMinute(2), ResetAfter: time.Minute, RetryAfter: time.Minute, Policy: "el"}, d)
}

// TestZeroSignalsDoNotPanic: signals built without their constructor
// report no room instead of panicking on the request path.
func TestZeroSignalsDoNotPanic(t *testing.T) {
	ok, err := (&core.CapacityLimit{}).Acquire(context.Background(), 1)
	require.False(t, ok)
	require.Error(t, err)
	ok, err = (*core.CapacityLimit)(nil).Acquire(context.Background(), 1)
	require.False(t, ok)
	require.Error(t, err)
	ok, err = core.LoadBelow{}.Acquire(context.Background(), 1)
	require.False(t, ok)
	require.NoError(t, err)
}
