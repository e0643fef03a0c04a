package core

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// driveCoarse stops any real ticker and lets the test call coarseTick by
// hand; it restores the real ticker afterwards.
func driveCoarse(t *testing.T) {
	t.Helper()
	// wait out a running ticker: with no reads it stops within coarseIdle
	for coarse.running.Load() {
		time.Sleep(coarseEvery)
	}
	coarseGo = func() {}
	t.Cleanup(func() {
		coarse.now.Store(coarseStopped)
		coarse.running.Store(false)
		coarseGo = func() { go coarseTicker() }
	})
}

func TestCoarseClockTicks(t *testing.T) {
	driveCoarse(t)
	var c coarseClock
	t0 := c.Now() // starts the clock at a fresh system reading
	require.True(t, coarse.running.Load())
	require.NotSame(t, coarseStopped, coarse.now.Load())
	assert.Equal(t, t0, c.Now(), "no tick: the same instant")

	t1 := t0.Add(coarseEvery)
	require.True(t, coarseTick(t1))
	assert.Equal(t, t1, c.Now(), "a tick publishes its time to every reader")
	assert.Equal(t, t1, c.Now())
}

func TestCoarseClockStopsWhenIdleAndRestarts(t *testing.T) {
	driveCoarse(t)
	var c coarseClock
	t0 := c.Now()
	ticks := int(coarseIdle / coarseEvery)
	tick := t0
	// read once per tick: it keeps running however long
	for range 3 * ticks {
		tick = tick.Add(coarseEvery)
		require.True(t, coarseTick(tick))
		require.Equal(t, tick, c.Now())
	}
	// unread for coarseIdle: the first tick after the last read still
	// counts it; the clock stops coarseIdle of ticks later
	for i := 0; i <= ticks; i++ {
		tick = tick.Add(coarseEvery)
		if !coarseTick(tick) {
			require.Equal(t, ticks, i, "stopped after coarseIdle unread")
			break
		}
		require.Less(t, i, ticks)
	}
	assert.Same(t, coarseStopped, coarse.now.Load())
	assert.False(t, coarse.running.Load())
	// the next read is a system reading (the manual ticks ran ahead of the
	// real clock by 4 s here, so it is earlier) and starts the clock again
	t2 := c.Now()
	assert.True(t, t2.Before(tick), "a fresh reading, not the stale tick")
	assert.True(t, coarse.running.Load())
	assert.Equal(t, t2, c.Now())
}

// Under the real ticker, every goroutine sees time move forward only.
func TestCoarseClockConcurrentReadersNeverGoBack(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c coarseClock
			prev := c.Now()
			for range 20_000 {
				now := c.Now()
				if now.Before(prev) {
					t.Errorf("time went back: %v after %v", now, prev)
					return
				}
				prev = now
			}
		}()
	}
	wg.Wait()
}

// Readers racing to start a stopped clock, and a ticker publishing while
// they read, never see time go back: a reader that loses the start waits
// for the winner's tick instead of returning a later reading of its own.
// The ticker here is the real lifecycle sped up: started by the winner,
// it publishes system readings and stops itself after a few ticks, so the
// readers restart the clock hundreds of times.
func TestCoarseClockStartRaceNeverGoesBack(t *testing.T) {
	driveCoarse(t)
	var starts atomic.Int64
	var tickers sync.WaitGroup
	// every fake ticker ends before the test does: one left running would
	// race with the next test's (or -count's next run's) clock
	t.Cleanup(tickers.Wait)
	coarseGo = func() {
		starts.Add(1)
		tickers.Add(1)
		go func() {
			defer tickers.Done()
			for range 5 {
				runtime.Gosched()
				coarseTick(SystemClock{}.Now())
			}
			coarse.now.Store(coarseStopped) // stop, as coarseTick does when idle
			coarse.running.Store(false)
		}()
	}
	var c coarseClock
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := c.Now()
			// until the clock has been restarted 20 times (the time cap
			// only bounds a broken clock that never restarts; a loaded
			// machine can take long to schedule 20 restarts)
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; starts.Load() < 20 && (i%1024 != 0 || time.Now().Before(deadline)); i++ {
				now := c.Now()
				if now.Before(prev) {
					t.Errorf("time went back: %v after %v", now, prev)
					return
				}
				prev = now
			}
		}()
	}
	wg.Wait()
	t.Logf("%d starts", starts.Load())
	assert.GreaterOrEqual(t, starts.Load(), int64(20), "the clock stopped and restarted under the readers")
}

// TestDefaultClockIsCoarse: a Limiter without WithClock reads the coarse
// clock, directly (the coarse flag), not through the interface.
func TestDefaultClockIsCoarse(t *testing.T) {
	l, err := NewLimiter(nilSafeStore{}, Policy{Name: "p", Limits: []Limit{PerMinute(2)}})
	require.NoError(t, err)
	assert.Equal(t, Clock(coarseClock{}), l.Clock())
	assert.True(t, l.coarse)
	l, err = NewLimiter(nilSafeStore{}, Policy{Name: "p", Limits: []Limit{PerMinute(2)}}, WithClock(SystemClock{}))
	require.NoError(t, err)
	assert.False(t, l.coarse)
}

// nilSafeStore admits everything.
type nilSafeStore struct{}

func (nilSafeStore) Take(context.Context, string, *Policy, time.Time, int64) (Decision, error) {
	return Decision{Allowed: true}, nil
}
