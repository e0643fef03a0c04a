package memstore

import (
	"sync"

	"github.com/limitkit/limitkit/core"
)

// One shard: open addressing with linear probing, chunked large state.

// shard is one lock's worth of a table: linear probing over keys, with the
// state of slot i in vals[i*w:(i+1)*w] (inline) or in the chunk entry
// vals[i].
type shard struct {
	mu      sync.Mutex
	n       int
	keys    []uint64
	vals    []int64
	chunks  [][]int64
	next    int64 // chunk entries handed out so far
	free    int64 // 1 + the first free chunk entry, 0 for none; each free entry's first word links the next
	scratch []int64
	recent  [recentSize]uint64 // hashes of the newest keys, a ring
	rpos    uint32             // next ring position
	hand    uint32             // where the eviction scan resumes
	_       [56]byte           // keep neighbouring shards' locks off one cache line
}

func (sh *shard) state(t *table, slot int) []int64 {
	if t.inline {
		return sh.vals[slot*t.words : (slot+1)*t.words : (slot+1)*t.words]
	}
	return sh.entry(t, sh.vals[slot])
}

func (sh *shard) entry(t *table, ref int64) []int64 {
	c := sh.chunks[ref/chunkSize]
	off := int(ref%chunkSize) * t.words
	return c[off : off+t.words : off+t.words]
}

// bytes is the memory the shard holds, as allocated.
func (sh *shard) bytes() int64 {
	b := allocBytes(8*cap(sh.keys)) + allocBytes(8*cap(sh.vals)) + allocBytes(8*cap(sh.scratch))
	if sh.chunks != nil {
		b += indexBytes(cap(sh.chunks))
	}
	for _, c := range sh.chunks {
		b += allocBytes(8 * cap(c))
	}
	return int64(b)
}

// take decides for hash h into *d, inserting the key when the decision changes a
// fresh state (a peek or a denial of a new key stores nothing).
func (sh *shard) take(d *core.Decision, t *table, h uint64, now, cost int64, elastic bool) {
	if i := sh.find(h); i >= 0 {
		if elastic {
			t.policy.DecideElasticTo(d, sh.state(t, i), now, cost)
		} else {
			t.policy.DecideTo(d, sh.state(t, i), now, cost)
		}
		return
	}
	if len(sh.scratch) != t.words {
		sh.scratch = make([]int64, t.words)
	} else {
		clear(sh.scratch)
	}
	if elastic {
		t.policy.DecideElasticTo(d, sh.scratch, now, cost)
	} else {
		t.policy.DecideTo(d, sh.scratch, now, cost)
	}
	sh.keep(t, h, now, sh.scratch)
}

// keep inserts hash h (known absent) with state st unless st is a fresh
// key's (all zero): a decision that changes nothing stores nothing.
func (sh *shard) keep(t *table, h uint64, now int64, st []int64) {
	for _, v := range st {
		if v != 0 {
			copy(sh.insert(t, h, now), st)
			return
		}
	}
}

// find returns the slot of hash h, or -1.
func (sh *shard) find(h uint64) int {
	if sh.keys == nil {
		return -1
	}
	mask := len(sh.keys) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch sh.keys[i] {
		case h:
			return i
		case 0:
			return -1
		}
	}
}

// insert adds hash h (known absent) and returns its zeroed state.
func (sh *shard) insert(t *table, h uint64, now int64) []int64 {
	if sh.n >= t.shardCap {
		sh.evict(t, h, now)
	}
	if sh.keys == nil || (sh.n+1)*8 > len(sh.keys)*7 {
		sh.grow(t)
	}
	mask := len(sh.keys) - 1
	i := int(h) & mask
	for sh.keys[i] != 0 {
		i = (i + 1) & mask
	}
	sh.keys[i] = h
	sh.n++
	sh.recent[sh.rpos%recentSize] = h
	sh.rpos++
	if !t.inline {
		sh.vals[i] = sh.alloc(t)
	}
	st := sh.state(t, i)
	clear(st)
	return st
}

// alloc returns a free chunk entry; a shard never holds more entries than
// its key cap (the last chunk is cut to fit).
func (sh *shard) alloc(t *table) int64 {
	if sh.free != 0 {
		ref := sh.free - 1
		sh.free = sh.entry(t, ref)[0]
		return ref
	}
	ref := sh.next
	if ref%chunkSize == 0 {
		if sh.chunks == nil {
			sh.chunks = make([][]int64, 0, t.maxChunks)
		}
		sh.chunks = append(sh.chunks, make([]int64, min(chunkSize, int64(t.shardCap)-ref)*int64(t.words)))
	}
	sh.next++
	return ref
}

func (sh *shard) grow(t *table) {
	n := minSlots
	if sh.keys != nil {
		n = 2 * len(sh.keys)
	}
	if n > t.maxSlots {
		if sh.keys != nil {
			return // at the cap: evict keeps n below shardCap
		}
		n = t.maxSlots
	}
	oldKeys, oldVals := sh.keys, sh.vals
	w := 1
	if t.inline {
		w = t.words
	}
	sh.keys = make([]uint64, n)
	sh.vals = make([]int64, n*w)
	mask := n - 1
	for j, k := range oldKeys {
		if k == 0 {
			continue
		}
		i := int(k) & mask
		for sh.keys[i] != 0 {
			i = (i + 1) & mask
		}
		sh.keys[i] = k
		copy(sh.vals[i*w:(i+1)*w], oldVals[j*w:(j+1)*w])
	}
}

// delete removes slot i, shifting later members of its probe run back so
// lookups never need tombstones.
func (sh *shard) delete(t *table, i int) {
	if !t.inline {
		ref := sh.vals[i]
		sh.entry(t, ref)[0] = sh.free
		sh.free = ref + 1
	}
	w := 1
	if t.inline {
		w = t.words
	}
	mask := len(sh.keys) - 1
	j := i
	for {
		j = (j + 1) & mask
		k := sh.keys[j]
		if k == 0 {
			break
		}
		home := int(k) & mask
		// k stays when its home is cyclically in (i, j]
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		sh.keys[i] = k
		copy(sh.vals[i*w:(i+1)*w], sh.vals[j*w:(j+1)*w])
		i = j
	}
	sh.keys[i] = 0
	clear(sh.vals[i*w : (i+1)*w])
	sh.n--
}
