package memstore

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"reflect"

	"github.com/limitkit/limitkit/core"
)

// One policy's table: its sizing within the key cap and memory budget.

// Table layout.
const (
	// inlineWords is the largest state kept inside the hash table itself.
	inlineWords = 4
	shardBits   = 8
	numShards   = 1 << shardBits
	// minShardKeys is the fewest keys a shard holds when the cap allows:
	// small caps use fewer shards, so that eviction always has a choice.
	minShardKeys = 64
	minSlots     = 8
	chunkSize    = 64
)

// table holds one policy's keys.
type table struct {
	key       *core.Policy // the first *Policy registered for this table
	policy    *core.Compiled
	words     int  // state words per key
	inline    bool // state stored in the slot
	shift     uint // a key's shard is its hash's top 64−shift bits
	shardCap  int  // keys per shard
	maxSlots  int  // slots per shard at most (power of two)
	maxChunks int  // state chunks per shard at most (large state)
	store     *memStore
	shards    [numShards]shard
}

// shardOf is key's hash (never 0: 0 marks an empty slot) and shard.
func (t *table) shardOf(seed maphash.Seed, key string) (uint64, *shard) {
	h := maphash.String(seed, key) | 1
	return h, &t.shards[(h>>t.shift)&(numShards-1)]
}

// newTable sizes c's table: the key cap from the options, the shard count
// so that a shard holds at least minShardKeys keys when the cap allows,
// and the keys per shard within the memory budget.
func (s *memStore) newTable(c *core.Compiled) (*table, error) {
	t := &table{policy: c, words: c.StateWords(), store: s}
	t.inline = t.words <= inlineWords
	keyCap, budget := s.maxKeys, -1
	if keyCap == 0 {
		keyCap, budget = defaultMaxKeys, s.maxBytes
	} else if s.bytesSet {
		budget = s.maxBytes
	}
	b, per := shardBits, 0
	for ; b >= 0; b-- {
		n := 1 << b
		per = (keyCap + n - 1) / n
		if budget >= 0 {
			per = min(per, t.fit(n, budget))
		}
		if per >= minShardKeys {
			break
		}
	}
	if b < 0 {
		b = 0
		per = keyCap
		if budget >= 0 {
			per = min(per, t.fit(1, budget))
		}
	}
	if per < 1 {
		return nil, fmt.Errorf("memstore: policy %q keeps %d bytes of state per key, and the memory budget WithMaxStateBytes(%d) does not hold one key; raise the budget",
			c.Policy().Name, 8*t.words, budget)
	}
	t.shift = uint(64 - b)
	t.shardCap = per
	t.maxSlots = slotsFor(per)
	t.maxChunks = (per + chunkSize - 1) / chunkSize
	return t, nil
}

// slotsFor is the slot count of a shard holding per keys at most 7/8 full.
func slotsFor(per int) int { return max(minSlots, 1<<bits.Len(uint(per*8/7))) }

// shardBytes is the most a shard of per keys holds: slots, state chunks
// and their index, and the scratch state, as allocated.
func (t *table) shardBytes(per int) int {
	if per == 0 {
		return 0
	}
	w := 1
	if t.inline {
		w = t.words
	}
	slots := slotsFor(per)
	b := allocBytes(8*slots) + allocBytes(8*slots*w) + allocBytes(8*t.words)
	if !t.inline {
		b += per/chunkSize*allocBytes(8*chunkSize*t.words) + allocBytes(8*(per%chunkSize)*t.words) +
			indexBytes((per+chunkSize-1)/chunkSize)
	}
	return b
}

// tableSize is the size of a table header (its shards' arrays aside).
var tableSize = int(reflect.TypeFor[table]().Size())

// fit is the most keys per shard whose n shards fit budget bytes.
func (t *table) fit(n, budget int) int {
	avail := budget - allocBytes(tableSize)
	lo, hi := 0, defaultMaxKeys // invariant: lo fits
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if n*t.shardBytes(m) <= avail {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}
