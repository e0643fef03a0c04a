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

// TestCountedSlotsFastPathCache: the counted taker's lock-free path
// finds a key's entry by its cache slot only when the slot holds that
// key's entry (two keys sharing a slot keep their own counts), and never
// counts on an entry the sweep dropped (the key gets a new one, whose
// count starts from the slots actually held).
func TestCountedSlotsFastPathCache(t *testing.T) {
	s := mustNew()
	defer s.Close()
	p := &core.ConcurrencyPolicy{Name: "c", Max: 5, Lease: time.Second}
	take := s.CountedSlots(p)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hash := func(k string) uint64 { h, _ := s.slotShard(k, p); return h }
	// two keys of one cache slot
	k1, k2 := "k1", ""
	for i := 0; k2 == ""; i++ {
		if k := "x" + strconv.Itoa(i); hash(k)&(slotCacheSize-1) == hash(k1)&(slotCacheSize-1) {
			k2 = k
		}
	}
	var held1 []*atomic.Int64
	for i := 0; i < 5; i++ {
		n, _, ok, _ := take(k1, now)
		require.True(t, ok)
		held1 = append(held1, n)
	}
	_, _, ok, _ := take(k2, now) // k2's entry takes the cache slot
	require.True(t, ok)
	_, _, ok, _ = take(k1, now)
	require.False(t, ok, "k1 took a slot on k2's cached entry")
	for _, n := range held1 {
		n.Add(-1)
	}
	// k1 is at zero; sweep its shard while k1's entry stays cached
	_, sh := s.slotShard(k1, p)
	tab := s.slotTable(p.Name)
	h1 := hash(k1)
	n, _, ok, _ := take(k1, now) // k1 cached again
	require.True(t, ok)
	n.Add(-1)
	for i := 0; sh.keys[h1] != nil && i < 1_000_000; i++ {
		k := "y" + strconv.Itoa(i)
		if h := hash(k); tab.shard(h) == sh && h&(slotCacheSize-1) != h1&(slotCacheSize-1) && h&(slotCacheSize-1) != hash(k2)&(slotCacheSize-1) {
			n, _, ok, _ := take(k, now)
			require.True(t, ok)
			n.Add(-1)
		}
	}
	_, still := sh.keys[h1]
	require.False(t, still, "k1 was not swept")
	require.Equal(t, int64(slotDead), tab.cache[h1&(slotCacheSize-1)].Load().n.Load(), "k1's swept entry is still cached")
	got := 0
	for i := 0; i < 8; i++ {
		if _, _, ok, _ := take(k1, now); ok {
			got++
		}
	}
	require.Equal(t, 5, got, "a swept entry's count was taken")
}

// TestSlotStoreReleaseFreesSlot: releasing a leased slot makes room for
// exactly one more holder, for leased and counted takers alike.
func TestSlotStoreReleaseFreesSlot(t *testing.T) {
	s := mustNew()
	defer s.Close()
	ctx := t.Context()
	p := &core.ConcurrencyPolicy{Name: "c", Max: 2, Lease: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for tok := uint64(1); tok <= 2; tok++ {
		_, ok, err := s.AcquireSlot(ctx, "k", p, tok, now)
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, ok, _ := s.AcquireSlot(ctx, "k", p, 3, now)
	require.False(t, ok)
	require.NoError(t, s.ReleaseSlot(ctx, "k", p, 1))
	require.NoError(t, s.ReleaseSlot(ctx, "k", p, 1)) // twice: frees nothing more
	_, held, ok, _ := s.CountedSlots(p)("k", now)
	require.True(t, ok, "the released slot was not freed")
	require.Equal(t, int64(2), held)
	_, ok, _ = s.AcquireSlot(ctx, "k", p, 4, now)
	require.False(t, ok, "a second release freed a slot")
}
