package memstore

import (
	"context"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// tenPerMinute is the login limit, once per algorithm.
func tenPerMinute() []*core.Policy {
	l := []core.Limit{core.PerMinute(10)}
	return []*core.Policy{
		{Name: "gcra", Algorithm: core.GCRA, Limits: l},
		{Name: "token_bucket", Algorithm: core.TokenBucket, Limits: l},
		{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: l},
		{Name: "sliding_log", Algorithm: core.SlidingWindowLog, Limits: l},
		{Name: "sliding_counter", Algorithm: core.SlidingWindowCounter, Buckets: 6, Limits: l},
		{Name: "gcra_two_limits", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(10), core.PerHour(30)}},
		{Name: "fixed_window_counted", Algorithm: core.FixedWindow, CountDenied: true, Limits: l},
	}
}

// exhaust spends victim's whole quota at now and checks it is denied.
func exhaust(t *testing.T, s *memStore, p *core.Policy, victim string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for {
		d, err := s.Take(ctx, victim, p, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			return
		}
	}
}

// flood sends one request for each of n new keys, from now on, one
// microsecond apart, and counts the victim's admissions in between.
func flood(t *testing.T, s *memStore, p *core.Policy, victim string, n int, now time.Time) (admitted int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		at := now.Add(time.Duration(i) * time.Microsecond)
		if _, err := s.Take(ctx, "junk:"+strconv.Itoa(i), p, at, 1); err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			if mustTake(t, s, victim, p, at, 1).Allowed {
				admitted++
			}
		}
	}
	return admitted
}

// TestFloodNeverRefreshesLimitedKey is the attack at a scaled-down
// cap: the victim spends its quota, then a flood of new keys (one request
// each, ten times the cap) must not give it a single further admission,
// whatever the algorithm. Before the fix the store evicted the victim
// (soonest to expire) and it had its full quota again.
func TestFloodNeverRefreshesLimitedKey(t *testing.T) {
	for _, capKeys := range []int{1 << 12, 300} {
		for _, p := range tenPerMinute() {
			t.Run(p.Name+"/cap"+strconv.Itoa(capKeys), func(t *testing.T) {
				s := mustNew(WithMaxKeys(capKeys))
				defer s.Close()
				exhaust(t, s, p, "victim", t0)
				admitted := flood(t, s, p, "victim", 10*capKeys, t0)
				assert.Zero(t, admitted, "the flood bought the limited key a fresh quota")
				st := s.Stats()
				assert.Positive(t, st.Evictions, "the flood did reach the cap")
				assert.Zero(t, st.LimitedEvictions, "junk with quota left is always the better victim")
				// the test can fail: once its window has passed the victim is admitted again
				d, err := s.Take(context.Background(), "victim", p, t0.Add(time.Hour), 1)
				require.NoError(t, err)
				assert.True(t, d.Allowed)
			})
		}
	}
}

// TestFloodOfLimitedKeysEvictsItsOwn: with a limit of one request, every
// flood key is itself limited after its request, so every candidate is
// limited; the newest key goes, so the flood evicts its own keys and the
// victim, limited before it, keeps its state.
func TestFloodOfLimitedKeysEvictsItsOwn(t *testing.T) {
	l := []core.Limit{core.PerHour(1)}
	for _, p := range []*core.Policy{
		{Name: "gcra", Algorithm: core.GCRA, Limits: l},
		{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: l},
		{Name: "sliding_log", Algorithm: core.SlidingWindowLog, Limits: l},
	} {
		t.Run(p.Name, func(t *testing.T) {
			s := mustNew(WithMaxKeys(1 << 10))
			defer s.Close()
			exhaust(t, s, p, "victim", t0)
			assert.Zero(t, flood(t, s, p, "victim", 20<<10, t0))
			assert.Positive(t, s.Stats().LimitedEvictions, "all candidates were limited")
		})
	}
}

// TestSlidingLogFloodWithinBudget is the second attack, scaled
// down: a 1000/hour sliding log whose key cap comes from the memory
// budget. The victim gets no attempt back, and the memory held stays
// within the budget, by the store's account and by the heap's.
func TestSlidingLogFloodWithinBudget(t *testing.T) {
	const budget = 24 << 20
	p := &core.Policy{Name: "login", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(1000)}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := mustNew(WithMaxStateBytes(budget))
	defer s.Close()
	d, err := s.Take(context.Background(), "victim", p, t0, 1000)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	capKeys := budget / (8 * 1001)
	admitted := flood(t, s, p, "victim", capKeys*3/2, t0.Add(time.Second))
	assert.Zero(t, admitted, "the flood bought the victim fresh attempts")
	st := s.Stats()
	assert.Positive(t, st.Evictions)
	assert.LessOrEqual(t, st.Keys, capKeys)
	assert.LessOrEqual(t, st.Bytes, int64(budget), "the store's account exceeds the budget")
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.LessOrEqual(t, grown, int64(budget), "the heap grew by %d bytes for a %d-byte budget", grown, budget)
	assert.InDelta(t, st.Bytes, grown, float64(budget)/50, "the store's account matches the heap")
	runtime.KeepAlive(s)
}

// TestBudgetHoldsForEveryAlgorithm floods tables sized by random budgets
// and checks the bytes held never exceed them and the cap is reached.
func TestBudgetHoldsForEveryAlgorithm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	policies := []*core.Policy{
		{Name: "gcra", Limits: []core.Limit{core.PerMinute(5)}},
		{Name: "tb", Algorithm: core.TokenBucket, Limits: []core.Limit{core.PerMinute(5)}},
		{Name: "fw", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(5)}},
		{Name: "sc", Algorithm: core.SlidingWindowCounter, Buckets: 60, Limits: []core.Limit{core.PerHour(5)}},
		{Name: "log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(300)}},
		{Name: "log4", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(3)}},
	}
	for round := 0; round < 6; round++ {
		budget := 100<<10 + rng.IntN(1<<20)
		for _, p := range policies {
			s := mustNew(WithMaxStateBytes(budget))
			tab, err := s.lookup(p)
			require.NoError(t, err)
			capKeys := tab.shardCap << (64 - tab.shift)
			for i := 0; i < capKeys*3/2; i++ {
				mustTake(t, s, strconv.Itoa(i), p, t0, 1)
			}
			st := s.Stats()
			assert.LessOrEqual(t, st.Bytes, int64(budget), "%s, budget %d", p.Name, budget)
			assert.Greater(t, st.Keys, capKeys*9/10, "%s, budget %d: the cap is used", p.Name, budget)
			assert.LessOrEqual(t, st.Keys, capKeys)
			s.Close()
		}
	}
}

// TestTableSizing checks the sizing against its definition for random
// options: within the budget, maximal for it, and enough keys per shard.
func TestTableSizing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 500; i++ {
		var opts []Option
		maxKeys, budget := 0, defaultMaxStateBytes
		if rng.IntN(2) == 0 {
			maxKeys = 1 + rng.IntN(1<<rng.IntN(23))
			opts = append(opts, WithMaxKeys(maxKeys))
		}
		if maxKeys == 0 || rng.IntN(2) == 0 {
			budget = 1 << 16 * (1 + rng.IntN(1<<rng.IntN(14)))
			opts = append(opts, WithMaxStateBytes(budget))
		}
		alg := core.Algorithm(rng.IntN(5))
		l := core.Per(int64(1+rng.IntN(1<<rng.IntN(11))), time.Hour)
		p := &core.Policy{Name: "p", Algorithm: alg, Limits: []core.Limit{l}}
		s := mustNew(opts...)
		tab, err := s.lookup(p)
		s.Close()
		if err != nil {
			require.ErrorContains(t, err, "does not hold one key")
			continue
		}
		n := 1 << (64 - tab.shift)
		total := tab.shardCap * n
		if maxKeys > 0 {
			assert.Less(t, total-maxKeys, n, "the cap rounds up to whole shards at most")
		} else {
			assert.LessOrEqual(t, total, defaultMaxKeys)
		}
		if maxKeys == 0 || len(opts) == 2 {
			held := n*tab.shardBytes(tab.shardCap) + allocBytes(int(unsafeSizeofTable))
			assert.LessOrEqual(t, held, budget)
		}
		assert.True(t, tab.shardCap >= minShardKeys || n == 1, "%d shards of %d keys", n, tab.shardCap)
	}
}

// TestLimitedKeySurvivesWhileAnyKeyHasQuota: in a one-shard table of 64
// keys, all limited but one that has spent a random part of its quota, a
// new key evicts that one, wherever it sits, and every limited key keeps
// its state.
func TestLimitedKeySurvivesWhileAnyKeyHasQuota(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	for _, p := range tenPerMinute() {
		t.Run(p.Name, func(t *testing.T) {
			for trial := 0; trial < 20; trial++ {
				s := mustNew(WithMaxKeys(minShardKeys))
				tab, err := s.lookup(p)
				require.NoError(t, err)
				require.Equal(t, uint(64), tab.shift, "one shard")
				spare := rng.IntN(minShardKeys)
				for i := 0; i < minShardKeys; i++ {
					k := "k" + strconv.Itoa(i)
					if i == spare {
						_, err := s.Take(ctx, k, p, t0, int64(1+rng.IntN(9))) // some quota left
						require.NoError(t, err)
						continue
					}
					exhaust(t, s, p, k, t0)
				}
				require.Equal(t, minShardKeys, s.Stats().Keys)
				mustTake(t, s, "newcomer", p, t0, 1)
				assert.Zero(t, s.Stats().LimitedEvictions)
				for i := 0; i < minShardKeys; i++ {
					if i == spare {
						continue
					}
					d := mustTake(t, s, "k"+strconv.Itoa(i), p, t0, 1)
					require.False(t, d.Allowed, "trial %d: limited key %d was evicted, spare %d", trial, i, spare)
				}
				s.Close()
			}
		})
	}
}

// TestAllocBytes checks the size classes the budget counts with against
// the running Go allocator.
func TestAllocBytes(t *testing.T) {
	for n := 1; n <= 40<<10; n += 1 + n/64 {
		require.Equal(t, cap(slices.Grow([]byte(nil), n)), allocBytes(n), "%d bytes", n)
	}
	for _, n := range []int{64 << 10, 512512, 1 << 20, 3<<20 + 1} {
		require.Equal(t, cap(slices.Grow([]byte(nil), n)), allocBytes(n), "%d bytes", n)
	}
}

// shardCensus lists the hashes of the limited keys of p's one-shard table
// at now, and counts the keys with quota left.
func shardCensus(t *testing.T, s *memStore, p *core.Policy, now time.Time) (limited []uint64, withQuota int) {
	tab, err := s.lookup(p)
	if err != nil || tab.shift != 64 {
		t.Fatalf("want a one-shard table: %v", err)
	}
	sh := &tab.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for j, k := range sh.keys {
		if k == 0 {
			continue
		}
		if tab.policy.Decide(sh.state(tab, j), now.UnixMicro(), 0).Remaining > 0 {
			withQuota++
		} else {
			limited = append(limited, k)
		}
	}
	return limited, withQuota
}

// checkEviction drives the traffic data encodes through a one-shard table
// of 64 keys and checks the eviction guarantee after every request: a key
// that was limited just before is still held and limited just after,
// unless the request evicted a limited key (Stats.LimitedEvictions), which
// happens only when every key of the shard was limited (the candidates
// cover a whole shard of 64). Each request is two bytes: the key (below
// 128 one of 8 hot keys, else a new key) and the cost (2 bits) with the
// time step in ms (6 bits).
func checkEviction(t *testing.T, data []byte) {
	if len(data) < 1 {
		return
	}
	l := []core.Limit{core.PerMinute(3)}
	policies := []*core.Policy{
		{Name: "gcra", Algorithm: core.GCRA, Limits: l},
		{Name: "token_bucket", Algorithm: core.TokenBucket, Limits: l},
		{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: l},
		{Name: "sliding_log", Algorithm: core.SlidingWindowLog, Limits: l},
		{Name: "sliding_counter", Algorithm: core.SlidingWindowCounter, Buckets: 6, Limits: l},
		{Name: "gcra_two_limits", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(3), core.PerHour(5)}},
		{Name: "fixed_window_counted", Algorithm: core.FixedWindow, CountDenied: true, Limits: l},
		{Name: "gcra_one", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(1)}},
	}
	p := policies[int(data[0])%len(policies)]
	s := mustNew(WithMaxKeys(minShardKeys))
	defer s.Close()
	ctx := context.Background()
	now, fresh := t0, 0
	for i := 1; i+1 < len(data); i += 2 {
		a, b := data[i], data[i+1]
		key := "hot" + strconv.Itoa(int(a%8))
		if a >= 128 {
			fresh++
			key = "new" + strconv.Itoa(fresh)
		}
		now = now.Add(time.Duration(b>>2) * time.Millisecond)
		limited, withQuota := shardCensus(t, s, p, now)
		before := s.Stats().LimitedEvictions
		if _, err := s.Take(ctx, key, p, now, int64(b&3)); err != nil {
			t.Fatal(err)
		}
		if s.Stats().LimitedEvictions != before {
			if withQuota > 0 {
				t.Fatalf("%s: a limited key was evicted while %d keys had quota left", p.Name, withQuota)
			}
			continue
		}
		tab, _ := s.lookup(p)
		sh := &tab.shards[0]
		for _, h := range limited {
			j := sh.find(h)
			if j < 0 {
				t.Fatalf("%s: a limited key was evicted at request %d (%s)", p.Name, i/2, key)
			}
			if h != maphash.String(s.seed, key)|1 && tab.policy.Decide(sh.state(tab, j), now.UnixMicro(), 0).Remaining != 0 {
				t.Fatalf("%s: a limited key got quota back at request %d (%s)", p.Name, i/2, key)
			}
		}
	}
}

// FuzzEvictionKeepsLimitedKeys: see checkEviction.
func FuzzEvictionKeepsLimitedKeys(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 8; i++ {
		data := make([]byte, 1+2*(200+rng.IntN(400)))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		data[0] = byte(i)
		f.Add(data)
	}
	f.Fuzz(checkEviction)
}

// TestEvictionKeepsLimitedKeys runs checkEviction over random traffic
// mixes (hot keys that get limited, a stream of new keys, quiet gaps).
func TestEvictionKeepsLimitedKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 32; i++ {
		hot := 1 + rng.IntN(255) // of 256: the share of hot-key requests
		data := make([]byte, 1+2*600)
		data[0] = byte(i)
		for j := 1; j+1 < len(data); j += 2 {
			data[j] = byte(128 + rng.IntN(128))
			if rng.IntN(256) < hot {
				data[j] = byte(rng.IntN(8))
			}
			data[j+1] = byte(rng.IntN(4)) | byte(rng.IntN(1+rng.IntN(64)))<<2
		}
		checkEviction(t, data)
	}
}
