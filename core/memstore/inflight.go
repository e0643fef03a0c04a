package memstore

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var _ storekit.SlotStore = (*memStore)(nil)

// slotShards is the number of shards of a concurrency limit's table.
const slotShards = 32

// slots holds the tables of the concurrency limits (core.Concurrency) of a
// Store, one per limit name: limiters of one name share their keys' slots.
type slots struct {
	slotMu   sync.Mutex                            // serializes adding a table
	slotTabs atomic.Pointer[map[string]*slotTable] // by limit name; copied on write
}

// slotCacheSize is the number of entries of a slot table's fast-path
// cache (a power of two).
const slotCacheSize = 1024

// slotTable is one limit's keys, sharded by key hash, and a direct-mapped
// cache of recently used entries by the low bits of their hash: a counted
// take whose entry is cached takes its slot with one compare-and-swap,
// without the shard's lock or a map lookup.
type slotTable struct {
	shards [slotShards]slotShard
	cache  [slotCacheSize]atomic.Pointer[slotEntry]
}

type slotShard struct {
	mu      sync.Mutex
	keys    map[uint64]*slotEntry // by the key's seeded hash, as the tables' keys
	sweepAt int
	_       [40]byte // keep shards' mutexes on separate cache lines
}

// slotEntry is one key's slots: the counted ones (CountedSlots: given
// back by their holders' n.Add(-1), without the shard's lock) and the
// leased ones (AcquireSlot: tokens with an expiry in hs, under the lock).
// n counts both: every counted holder and every leased holder in hs (an
// expired one until it is dropped, under the lock). n only grows by a
// compare-and-swap from a value below Max, from the lock-free fast path
// and under the lock alike, so no interleaving holds more than Max; a
// release racing an acquisition can only make room. A swept entry's n is
// slotDead (set from zero by a compare-and-swap, so never while a slot is
// held): a fast path still holding it fails its swap and takes the lock.
type slotEntry struct {
	n  atomic.Int64
	h  uint64 // the key's hash: the cache's tag
	hs []holder
}

// slotDead is the count of an entry the sweep dropped: below any count.
const slotDead = math.MinInt64 / 2

// takeSlot adds one to e's count if it is below limit (and e not
// swept), returning the count after; ok false leaves it unchanged.
func (e *slotEntry) takeSlot(limit int64) (held int64, ok bool) {
	for {
		v := e.n.Load()
		if v < 0 || v >= limit {
			return max(v, 0), false
		}
		if e.n.CompareAndSwap(v, v+1) {
			return v + 1, true
		}
	}
}

// prune drops e's leased holders expired at now (µs), and their counts.
// Under the shard's lock.
func (e *slotEntry) prune(now int64) {
	if n := len(e.hs); n > 0 {
		if e.hs = live(e.hs, now); len(e.hs) < n {
			e.n.Add(int64(len(e.hs) - n))
		}
	}
}

// holder is one leased slot: its token and lease expiry (µs since the epoch).
type holder struct {
	token uint64
	exp   int64
}

// slotTable returns the table of the limit named name, creating it on
// first use. The lookup is one atomic load and one map read.
func (s *memStore) slotTable(name string) *slotTable {
	if m := s.slotTabs.Load(); m != nil {
		if t := (*m)[name]; t != nil {
			return t
		}
	}
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	var old map[string]*slotTable
	if m := s.slotTabs.Load(); m != nil {
		old = *m
	}
	if t := old[name]; t != nil {
		return t
	}
	t := &slotTable{}
	for i := range t.shards {
		t.shards[i].keys = make(map[uint64]*slotEntry)
		t.shards[i].sweepAt = 64
	}
	m := make(map[string]*slotTable, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = t
	s.slotTabs.Store(&m)
	return t
}

// slotShard returns key's hash and shard in p's table. Two keys whose
// seeded 64-bit hashes collide share their slots, as they share state in
// the tables (see Store).
func (s *memStore) slotShard(key string, p *core.ConcurrencyPolicy) (uint64, *slotShard) {
	h := maphash.String(s.seed, key)
	return h, s.slotTable(p.Name).shard(h)
}

// shard is the shard of the key of hash h.
func (t *slotTable) shard(h uint64) *slotShard {
	return &t.shards[h>>59] // the top 5 bits: slotShards is 32
}

// live drops the holders expired at now (µs) from hs, in place.
func live(hs []holder, now int64) []holder {
	out := hs[:0]
	for _, h := range hs {
		if h.exp > now {
			out = append(out, h)
		}
	}
	return out
}

// entry returns the entry of the key of hash h, adding an empty one (after a sweep, when the
// shard's key count has doubled since the last) if there is none. Under
// sh.mu.
func (sh *slotShard) entry(h uint64, now time.Time) *slotEntry {
	if e := sh.keys[h]; e != nil {
		return e
	}
	if len(sh.keys) >= sh.sweepAt {
		us := now.UnixMicro()
		for k, e := range sh.keys {
			if e.prune(us); len(e.hs) == 0 && e.n.CompareAndSwap(0, slotDead) {
				delete(sh.keys, k)
			}
		}
		sh.sweepAt = max(2*len(sh.keys), 64)
	}
	e := &slotEntry{h: h}
	sh.keys[h] = e
	return e
}

// AcquireSlot implements [storekit.SlotStore]: it takes (or renews) token's
// leased slot of key under p at now, in one critical section of the key's
// shard; counted slots (CountedSlots) of key count towards
// p.Max. A key takes about 70 bytes (the key is not kept) plus 16 per
// leased holder; keys with no slot held (released, or expired without
// releasing) are dropped when their shard is swept, each time a new key
// finds the shard's key count doubled since the last sweep; each limit
// name adds 8 KiB (the counted slots' cache). held is exact
// when no counted slot is released during the call. Safe for concurrent
// use.
func (s *memStore) AcquireSlot(_ context.Context, key string, p *core.ConcurrencyPolicy, token uint64, now time.Time) (int64, bool, error) {
	if s.closed.Load() {
		return 0, false, core.ErrClosed
	}
	lease := p.Lease
	if lease <= 0 {
		lease = core.DefaultLease
	}
	us := now.UnixMicro()
	exp := us + lease.Microseconds()
	h, sh := s.slotShard(key, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entry(h, now)
	e.prune(us)
	for i := range e.hs {
		if e.hs[i].token == token {
			e.hs[i].exp = exp
			return max(e.n.Load(), 0), true, nil
		}
	}
	held, ok := e.takeSlot(p.Max)
	if ok {
		e.hs = append(e.hs, holder{token: token, exp: exp})
	}
	return held, ok, nil
}

// CountedSlots returns the taker of the embedded store's in-flight slots
// of p, which core.NewConcurrency asks for once (call
// core.Concurrency.Acquire instead): a plain count per key, with no
// token, no lease and no renewal, since this process's slots go away with
// its memory. The taker drops key's expired leased holders
// (AcquireSlot) at now; then, if fewer than p.Max slots of key are
// held (counted and leased together), it adds one to key's count (ok
// true) and returns the count; else it changes nothing (ok false, n nil).
// held is the slots held after the call. The holder gives the slot back
// with exactly one n.Add(-1), from any goroutine; the Store keeps the key
// while its count is above zero. A take is one critical section of the
// key's shard and allocates nothing for a key already present; its error
// is core.ErrClosed once the Store is closed. p must not be modified
// while the taker is in use. Safe for concurrent use.
func (s *memStore) CountedSlots(p *core.ConcurrencyPolicy) func(key string, now time.Time) (n *atomic.Int64, held int64, ok bool, err error) {
	t := s.slotTable(p.Name)
	return func(key string, now time.Time) (*atomic.Int64, int64, bool, error) {
		if s.closed.Load() {
			return nil, 0, false, core.ErrClosed
		}
		h := maphash.String(s.seed, key)
		c := &t.cache[h&(slotCacheSize-1)]
		if e := c.Load(); e != nil && e.h == h {
			// the fast path: no lock, no map; a full key (its expired
			// leased holders are dropped under the lock) or a swept entry
			// goes on below
			if held, ok := e.takeSlot(p.Max); ok {
				return &e.n, held, true, nil
			}
		}
		sh := t.shard(h)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		e := sh.entry(h, now)
		e.prune(now.UnixMicro())
		c.Store(e)
		held, ok := e.takeSlot(p.Max)
		if !ok {
			return nil, held, false, nil
		}
		return &e.n, held, true, nil
	}
}

// ReleaseSlot implements [storekit.SlotStore]: it frees token's leased slot of
// key under p; a key left with no slot held is dropped at the next sweep.
// Safe for concurrent use.
func (s *memStore) ReleaseSlot(_ context.Context, key string, p *core.ConcurrencyPolicy, token uint64) error {
	if s.closed.Load() {
		return core.ErrClosed
	}
	h, sh := s.slotShard(key, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.keys[h]
	if e == nil {
		return nil
	}
	for i := range e.hs {
		if e.hs[i].token == token {
			e.hs[i] = e.hs[len(e.hs)-1]
			e.hs = e.hs[:len(e.hs)-1]
			e.n.Add(-1)
			break
		}
	}
	return nil // the entry stays for the key's next holder; swept later
}
