package memstore

import (
	"context"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

var t0 = time.Unix(1_767_000_000, 0)

// mustTake is s.Take that fails the test on an error, so that a store
// error (a zero Decision) never passes for a denial.
func mustTake(t testing.TB, s *memStore, key string, p *core.Policy, at time.Time, cost int64) core.Decision {
	t.Helper()
	d, err := s.Take(context.Background(), key, p, at, cost)
	require.NoError(t, err, "key %q", key)
	return d
}

func gcraPolicy(name string) *core.Policy {
	return &core.Policy{Name: name, Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(2)}}
}

// TestKeyCapEvictsExpiredFirst: at a full shard, an expired key is the
// victim when it is among the candidates, rather than a live key with more
// quota left or a limited key; dropping it counts no eviction.
func TestKeyCapEvictsExpiredFirst(t *testing.T) {
	take := mustTake
	t.Run("flood at the cap", func(t *testing.T) {
		s := mustNew(WithMaxKeys(numShards)) // 4 shards of 64 keys
		defer s.Close()
		p := gcraPolicy("cap")
		for i := 0; i < 5000; i++ {
			d := take(t, s, "k"+strconv.Itoa(i), p, t0, 1)
			require.True(t, d.Allowed, "a new key is always tracked and admitted")
		}
		st := s.Stats()
		assert.Equal(t, numShards, st.Keys, "the cap holds, and is reached")
		assert.Equal(t, uint64(5000-numShards), st.Evictions, "every key beyond the cap evicted a live one")
		// An hour later every key has expired. The newest key of each shard
		// is the first candidate the next new key meets, so each shard's
		// first new key replaces an expired key, uncounted. (Later new keys
		// meet the previous new key first, which has spent one unit of its
		// quota and is taken at once: expired keys win only over the
		// candidates considered before such a key.)
		for i := 0; i < 5000; i++ {
			take(t, s, "new"+strconv.Itoa(i), p, t0.Add(time.Hour), 1)
		}
		assert.Equal(t, numShards, s.Stats().Keys)
		assert.Equal(t, uint64(5000-4), s.Stats().Evictions-st.Evictions,
			"exactly one expired key per shard goes uncounted: every later new key takes the previous one, which spent one unit, at once")
	})
	t.Run("expired rather than live with more quota left", func(t *testing.T) {
		s := mustNew(WithMaxKeys(minShardKeys)) // one shard of 64 keys
		defer s.Close()
		p := &core.Policy{Name: "choice", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(10)}}
		live := t0.Add(40 * time.Second)
		// 63 live keys that spent half their quota, and one that spent one
		// unit at t0 (expired from t0+6s), inserted fourth from last: the
		// eviction's first candidates are the newest keys, newest first, so
		// three live keys are considered before the expired one.
		for i := 0; i < minShardKeys; i++ {
			if i == minShardKeys-4 {
				take(t, s, "old", p, t0, 1)
				continue
			}
			take(t, s, "live"+strconv.Itoa(i), p, live, 5)
		}
		require.Equal(t, minShardKeys, s.Stats().Keys)
		now := t0.Add(50 * time.Second)
		take(t, s, "new", p, now, 5)
		st := s.Stats()
		assert.Equal(t, minShardKeys, st.Keys)
		assert.Zero(t, st.Evictions, "an expired key was the victim: no eviction counted")
		// every live key kept its state: 5 spent at +40s, 1.67 refilled by +50s
		for i := 0; i < minShardKeys; i++ {
			if i == minShardKeys-4 {
				continue
			}
			assert.Equal(t, int64(6), take(t, s, "live"+strconv.Itoa(i), p, now, 0).Remaining, "live%d kept its state", i)
		}
		assert.Equal(t, int64(5), take(t, s, "new", p, now, 0).Remaining, "the new key is tracked")
	})
	t.Run("expired rather than limited, then the newest limited", func(t *testing.T) {
		s := mustNew(WithMaxKeys(minShardKeys)) // one shard of 64 keys
		defer s.Close()
		p := gcraPolicy("limited")
		half := minShardKeys / 2
		for i := 0; i < half; i++ {
			take(t, s, "old"+strconv.Itoa(i), p, t0, 1) // expired from t0+30s
		}
		for i := 0; i < half; i++ {
			take(t, s, "lim"+strconv.Itoa(i), p, t0.Add(40*time.Second), 2) // limited until t0+100s
		}
		now := t0.Add(50 * time.Second)
		for i := 0; i < half; i++ {
			require.True(t, take(t, s, "new"+strconv.Itoa(i), p, now, 2).Allowed)
		}
		st := s.Stats()
		assert.Equal(t, minShardKeys, st.Keys)
		assert.Zero(t, st.Evictions, "each new key replaced an expired key, never a limited one")
		for i := 0; i < half; i++ {
			assert.False(t, take(t, s, "lim"+strconv.Itoa(i), p, now, 1).Allowed, "lim%d is still limited", i)
			assert.False(t, take(t, s, "new"+strconv.Itoa(i), p, now, 1).Allowed, "new%d is tracked", i)
		}
		// No expired key is left: every candidate is limited, and the newest
		// goes (counted as a limited eviction).
		require.True(t, take(t, s, "extra", p, now, 2).Allowed)
		st = s.Stats()
		assert.Equal(t, uint64(1), st.Evictions)
		assert.Equal(t, uint64(1), st.LimitedEvictions)
		for i := 0; i < half; i++ {
			assert.False(t, take(t, s, "lim"+strconv.Itoa(i), p, now, 1).Allowed, "lim%d is still limited", i)
		}
		for i := 0; i < half-1; i++ {
			assert.False(t, take(t, s, "new"+strconv.Itoa(i), p, now, 1).Allowed, "new%d is still limited", i)
		}
		assert.True(t, take(t, s, "new"+strconv.Itoa(half-1), p, now, 1).Allowed, "the newest key was the victim")
	})
}

func TestCapKeepsHotKeyTracked(t *testing.T) {
	// The hot key is never admitted untracked: once denied, it stays denied
	// while other keys churn through the table (eviction prefers the keys
	// that expire soonest; the hot key's state lasts longest).
	s := mustNew(WithMaxKeys(numShards * 4))
	defer s.Close()
	p := &core.Policy{Name: "hot", Algorithm: core.GCRA, Limits: []core.Limit{core.PerHour(3)}}
	for i := 0; i < 3; i++ {
		require.True(t, mustTake(t, s, "hot", p, t0, 1).Allowed)
	}
	for i := 0; i < 20000; i++ {
		mustTake(t, s, "churn"+strconv.Itoa(i), p, t0, 1)
		if i%1000 == 0 {
			require.False(t, mustTake(t, s, "hot", p, t0, 1).Allowed, "after %d churn keys", i)
		}
	}
}

func TestSweepDropsExpired(t *testing.T) {
	clock := core.NewManualClock(t0)
	s := mustNew(WithClock(clock))
	defer s.Close()
	for _, p := range []*core.Policy{
		gcraPolicy("g"),
		{Name: "log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerMinute(50)}},
		{Name: "sc", Algorithm: core.SlidingWindowCounter, Buckets: 60, Limits: []core.Limit{core.PerHour(50)}},
		{Name: "fw", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(50)}},
		{Name: "tb", Algorithm: core.TokenBucket, Limits: []core.Limit{core.PerMinute(50)}},
	} {
		for i := 0; i < 1000; i++ {
			mustTake(t, s, strconv.Itoa(i), p, t0, 1)
		}
	}
	require.Equal(t, 5000, s.Stats().Keys)
	s.sweep()
	assert.Equal(t, 5000, s.Stats().Keys, "nothing has expired yet")
	clock.Advance(2 * time.Minute)
	s.sweep()
	assert.Equal(t, 1000, s.Stats().Keys, "only the hourly counter's keys remain")
	clock.Advance(2 * time.Hour)
	s.sweep()
	assert.Zero(t, s.Stats().Keys)
	// swept keys start afresh
	assert.True(t, mustTake(t, s, "1", gcraPolicy("g"), clock.Now(), 2).Allowed)
}

func TestDeleteKeepsProbeChains(t *testing.T) {
	// Many keys in a small shard table, half expiring early: after a sweep
	// every survivor is still found (backward-shift deletion keeps chains).
	// 8,000 keys over 256 shards of at most 64: about 31 a shard, so no
	// shard fills (10,000 filled one in about 2% of runs, and the eviction
	// of a limited key then failed the test for the wrong reason)
	const n = 8000
	s := mustNew(WithMaxKeys(numShards * 64))
	defer s.Close()
	short := &core.Policy{Name: "mix", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(1)}}
	for i := 0; i < n; i++ {
		mustTake(t, s, strconv.Itoa(i), short, t0.Add(time.Duration(i%2)*30*time.Second), 1)
	}
	require.Zero(t, s.Stats().Evictions, "a shard filled: the test is about sweeps, not eviction")
	s.clock = core.NewManualClock(t0.Add(61 * time.Second))
	s.sweep()
	kept := s.Stats().Keys
	assert.Positive(t, kept)
	assert.Less(t, kept, n)
	for i := 1; i < n; i += 2 {
		if mustTake(t, s, strconv.Itoa(i), short, t0.Add(61*time.Second), 1).Allowed {
			t.Fatalf("key %d lost its state in a sweep", i)
		}
	}
}

func TestCloseIsIdempotentAndStopsSweeper(t *testing.T) {
	s := mustNew(WithSweepInterval(time.Millisecond))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err := s.Take(context.Background(), "k", gcraPolicy("g"), t0, 1)
	assert.ErrorIs(t, err, core.ErrClosed)
	select {
	case <-s.done: // the sweeper goroutine has returned
	default:
		t.Fatal("Close returned before the sweeper stopped")
	}
}

func TestPolicyNameConflict(t *testing.T) {
	s := mustNew()
	defer s.Close()
	ctx := context.Background()
	_, err := s.Take(ctx, "k", gcraPolicy("same"), t0, 1)
	require.NoError(t, err)
	other := &core.Policy{Name: "same", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(3)}}
	_, err = s.Take(ctx, "k", other, t0, 1)
	assert.ErrorContains(t, err, "different limits")
	_, err = s.Take(ctx, "k", &core.Policy{Name: "bad"}, t0, 1)
	assert.ErrorContains(t, err, "no limits")
}

func TestOptionsValidate(t *testing.T) {
	_, err := newMem(WithMaxKeys(-1))
	assert.ErrorContains(t, err, "WithMaxKeys")
	if big := int64(1)<<32 + 1; int64(int(big)) == big { // 64-bit ints
		_, err = newMem(WithMaxKeys(int(big)))
		assert.ErrorContains(t, err, "WithMaxKeys")
	}
	_, err = newMem(WithSweepInterval(0))
	assert.ErrorContains(t, err, "WithSweepInterval")
	_, err = newMem(WithClock(nil))
	assert.ErrorContains(t, err, "WithClock")
	_, err = newMem(WithMaxStateBytes(0))
	assert.ErrorContains(t, err, "WithMaxStateBytes")
}

func TestPeekAndDenialOfNewKeyStoreNothing(t *testing.T) {
	s := mustNew()
	defer s.Close()
	p := gcraPolicy("g")
	mustTake(t, s, "peek", p, t0, 0)
	require.False(t, mustTake(t, s, "huge", p, t0, 100).Allowed)
	assert.Zero(t, s.Stats().Keys)
}

func TestLargeStateKeysAreCapped(t *testing.T) {
	const budget = 1 << 20
	s := mustNew(WithMaxStateBytes(budget))
	defer s.Close()
	p := &core.Policy{Name: "log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(500)}}
	for i := 0; i < 3000; i++ {
		mustTake(t, s, strconv.Itoa(i), p, t0, 1)
	}
	// 1 MiB holds at most 1 MiB / (501 words × 8 B) = 261 keys; slots and
	// buffers take a little of it
	st := s.Stats()
	assert.LessOrEqual(t, st.Keys, 261)
	assert.Greater(t, st.Keys, 200)
	assert.LessOrEqual(t, st.Bytes, int64(budget))
}

func TestStatsCountsSharedTableOnce(t *testing.T) {
	s := mustNew()
	defer s.Close()
	a, b := gcraPolicy("shared"), gcraPolicy("shared") // two pointers, one name, one table
	mustTake(t, s, "k1", a, t0, 1)
	mustTake(t, s, "k2", b, t0, 1)
	assert.Equal(t, 2, s.Stats().Keys)
}

var unsafeSizeofTable = unsafe.Sizeof(table{})
