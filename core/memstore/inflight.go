package memstore

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/limitkit/limitkit/core"
)

var _ core.SlotStore = (*Store)(nil)

// slotShards is the number of shards of a concurrency limit's table.
const slotShards = 32

// slots holds the tables of the concurrency limits (core.Concurrency) of a
// Store, one per limit name: limiters of one name share their keys' slots.
type slots struct {
	slotMu  sync.RWMutex
	byName  map[string]*slotTable
	byLimit map[*core.ConcurrencyPolicy]*slotTable
}

// slotTable is one limit's keys, sharded by key hash.
type slotTable struct {
	shards [slotShards]slotShard
}

type slotShard struct {
	mu      sync.Mutex
	keys    map[string][]holder
	sweepAt int
	_       [40]byte // keep shards' mutexes on separate cache lines
}

// holder is one held slot: its token and lease expiry (µs since the epoch).
type holder struct {
	token uint64
	exp   int64
}

// table returns p's table, creating it on first use.
func (s *Store) slotTable(p *core.ConcurrencyPolicy) *slotTable {
	s.slotMu.RLock()
	t := s.byLimit[p]
	s.slotMu.RUnlock()
	if t != nil {
		return t
	}
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	if s.byName == nil {
		s.byName = make(map[string]*slotTable)
		s.byLimit = make(map[*core.ConcurrencyPolicy]*slotTable)
	}
	t = s.byName[p.Name]
	if t == nil {
		t = &slotTable{}
		for i := range t.shards {
			t.shards[i].keys = make(map[string][]holder)
			t.shards[i].sweepAt = 64
		}
		s.byName[p.Name] = t
	}
	s.byLimit[p] = t
	return t
}

func (s *Store) slotShard(key string, p *core.ConcurrencyPolicy) *slotShard {
	t := s.slotTable(p)
	return &t.shards[maphash.String(s.seed, key)%slotShards]
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

// AcquireSlot implements [core.SlotStore]: it takes (or renews) token's
// slot of key under p at now, in one critical section of the key's shard.
// A key takes about 80 bytes plus 16 per holder; keys with no live holder
// (released, or expired without releasing) are dropped when their shard is
// swept, each time a new key finds the shard's key count doubled since
// the last sweep. Safe for concurrent use.
func (s *Store) AcquireSlot(_ context.Context, key string, p *core.ConcurrencyPolicy, token uint64, now time.Time) (int64, bool, error) {
	if s.closed.Load() {
		return 0, false, core.ErrClosed
	}
	lease := p.Lease
	if lease <= 0 {
		lease = core.DefaultLease
	}
	us := now.UnixMicro()
	exp := us + lease.Microseconds()
	sh := s.slotShard(key, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	hs, found := sh.keys[key]
	hs = live(hs, us)
	for i := range hs {
		if hs[i].token == token {
			hs[i].exp = exp
			sh.keys[key] = hs
			return int64(len(hs)), true, nil
		}
	}
	if int64(len(hs)) >= p.Max {
		sh.keys[key] = hs
		return int64(len(hs)), false, nil
	}
	if !found && len(sh.keys) >= sh.sweepAt {
		for k, v := range sh.keys {
			if v = live(v, us); len(v) == 0 {
				delete(sh.keys, k)
			} else {
				sh.keys[k] = v
			}
		}
		sh.sweepAt = max(2*len(sh.keys), 64)
	}
	hs = append(hs, holder{token: token, exp: exp})
	sh.keys[key] = hs
	return int64(len(hs)), true, nil
}

// ReleaseSlot implements [core.SlotStore]: it frees token's slot of key
// under p; a key left with no holder is dropped at the next sweep. Safe for concurrent
// use.
func (s *Store) ReleaseSlot(_ context.Context, key string, p *core.ConcurrencyPolicy, token uint64) error {
	if s.closed.Load() {
		return core.ErrClosed
	}
	sh := s.slotShard(key, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	hs, ok := sh.keys[key]
	if !ok {
		return nil
	}
	for i := range hs {
		if hs[i].token == token {
			hs[i] = hs[len(hs)-1]
			hs = hs[:len(hs)-1]
			break
		}
	}
	sh.keys[key] = hs // kept empty for the key's next holder; swept later
	return nil
}
