package memstore

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestCountedSlotsCountAndSweep: the counted taker admits exactly Max
// from many goroutines, a release is one decrement of the returned count,
// counted and leased slots of a key count together, and a key whose count
// is back at zero is swept (one with a holder is not).
func TestCountedSlotsCountAndSweep(t *testing.T) {
	s := mustNew()
	defer s.Close()
	p := &core.ConcurrencyPolicy{Name: "c", Max: 5, Lease: time.Second}
	take := s.CountedSlots(p)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var admitted, bad atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 40; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _, ok, err := take("k", now)
			if err != nil || ok != (n != nil) {
				bad.Add(1)
			}
			if ok {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, bad.Load())
	require.Equal(t, int64(5), admitted.Load())
	n, held, ok, _ := take("k", now)
	require.False(t, ok)
	require.Equal(t, int64(5), held)
	require.Nil(t, n)
	h, sh := s.slotShard("k", p)
	e := sh.keys[h]
	require.Equal(t, int64(5), e.n.Load())
	for i := 0; i < 5; i++ {
		e.n.Add(-1) // what core.Slot.Release does
	}
	// a leased holder counts against the counted slots, until it expires
	for i := 0; i < 4; i++ {
		_, _, ok, _ := take("k", now)
		require.True(t, ok)
	}
	_, ok, err := s.AcquireSlot(t.Context(), "k", p, 9, now)
	require.NoError(t, err)
	require.True(t, ok)
	_, held, ok, _ = take("k", now)
	require.False(t, ok, "a leased holder did not count")
	require.Equal(t, int64(5), held)
	_, held, ok, _ = take("k", now.Add(time.Second))
	require.True(t, ok, "an expired leased holder still counted")
	require.Equal(t, int64(5), held)
	e.n.Add(-5)
	// one other key stays held; the sweep drops "k" (zero) but not it
	_, _, ok, _ = take("held", now)
	require.True(t, ok)
	hh, hsh := s.slotShard("held", p)
	for i := 0; i < 20000; i++ {
		n, _, ok, _ := take(strconv.Itoa(i), now)
		require.True(t, ok)
		n.Add(-1)
	}
	_, still := sh.keys[h]
	require.False(t, still, "a key at zero was never swept")
	require.Equal(t, int64(1), hsh.keys[hh].n.Load(), "the sweep dropped a held key")
	total := 0
	for _, tab := range *s.slotTabs.Load() {
		for i := range tab.shards {
			total += len(tab.shards[i].keys)
		}
	}
	require.Less(t, total, 20000/4, "released keys were not swept")
	require.NoError(t, s.Close())
	_, _, _, err = take("k", now)
	require.ErrorIs(t, err, core.ErrClosed)
}
