package memstore

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
)

var _ core.SlotStore = (*memStore)(nil)

// slotShards is the number of shards of a concurrency limit's table.
const slotShards = 32

// slots holds the tables of the concurrency limits (core.Concurrency) of a
// Store, one per limit name: limiters of one name share their keys' slots.
type slots struct {
	slotMu   sync.Mutex                            // serializes adding a table
	slotTabs atomic.Pointer[map[string]*slotTable] // by limit name; copied on write
}

// slotTable is one limit's keys, sharded by key hash.
type slotTable struct {
	shards [slotShards]slotShard
}

type slotShard struct {
	mu      sync.Mutex
	keys    map[uint64]*slotEntry // by the key's seeded hash, as the tables' keys
	sweepAt int
	_       [40]byte // keep shards' mutexes on separate cache lines
}

// slotEntry is one key's slots: the counted ones (AcquireCounted: a count,
// given back by its holders' n.Add(-1) without the shard's lock) and the
// leased ones (AcquireSlot: tokens with an expiry, under the lock). The
// count only grows under the shard's lock, where Max is checked, so a
// release racing an acquisition can only make room.
type slotEntry struct {
	n  atomic.Int64
	hs []holder
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
			if e.hs = live(e.hs, us); len(e.hs) == 0 && e.n.Load() == 0 {
				delete(sh.keys, k)
			}
		}
		sh.sweepAt = max(2*len(sh.keys), 64)
	}
	e := &slotEntry{}
	sh.keys[h] = e
	return e
}

// AcquireSlot implements [core.SlotStore]: it takes (or renews) token's
// leased slot of key under p at now, in one critical section of the key's
// shard; counted slots (AcquireCounted) of key count towards
// p.Max. A key takes about 50 bytes (the key is not kept) plus 16 per
// leased holder; keys with no slot held (released, or expired without
// releasing) are dropped when their shard is swept, each time a new key
// finds the shard's key count doubled since the last sweep. held is exact
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
	e.hs = live(e.hs, us)
	held := e.n.Load() + int64(len(e.hs))
	for i := range e.hs {
		if e.hs[i].token == token {
			e.hs[i].exp = exp
			return held, true, nil
		}
	}
	if held >= p.Max {
		return held, false, nil
	}
	e.hs = append(e.hs, holder{token: token, exp: exp})
	return held + 1, true, nil
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
		sh := t.shard(h)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		e := sh.entry(h, now)
		if len(e.hs) > 0 {
			e.hs = live(e.hs, now.UnixMicro())
		}
		held := e.n.Load() + int64(len(e.hs))
		if held >= p.Max {
			return nil, held, false, nil
		}
		e.n.Add(1)
		return &e.n, held + 1, true, nil
	}
}

// ReleaseSlot implements [core.SlotStore]: it frees token's leased slot of
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
			break
		}
	}
	return nil // the entry stays for the key's next holder; swept later
}
