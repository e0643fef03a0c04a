package memstore

import (
	"math/bits"
)

// Eviction at a full shard (the policy is documented on Store).

// Eviction candidates: the newest keys, the new key's probe run, a
// pseudo-random sample, and, when all of those are limited, a window
// of a scan that resumes where the previous one stopped.
const (
	recentSize = 8
	probeSize  = 8
	sampleSize = 8
	scanSize   = minShardKeys // a whole shard of the smallest size
)

// evictor chooses the key a new key replaces at a full shard (see Store).
type evictor struct {
	t      *table
	sh     *shard
	now    int64
	slot   int   // best candidate so far, -1 for none
	rem    int64 // its quota left (nominal)
	capa   int64 // its binding limit's capacity
	exp    int64 // its expiry
	live   bool  // false when slot has expired
	newest int   // slot of the newest key among the candidates, -1 for none
}

// consider scores slot i and reports whether to stop looking: i has
// expired, or has spent at most one unit of its quota, so evicting it
// loses (almost) nothing.
func (e *evictor) consider(i int) bool {
	st := e.sh.state(e.t, i)
	exp := e.t.policy.ExpiresAt(st, e.now)
	if exp <= e.now {
		e.slot, e.live = i, false
		return true
	}
	d := e.t.policy.Decide(st, e.now, 0) // a peek: changes nothing
	capa := d.Limit.Burst
	if capa <= 0 {
		capa = d.Limit.Requests
	}
	rem := max(0, d.Remaining)
	// more quota left relative to capacity, then sooner expiry
	if e.slot < 0 || rem*e.capa > e.rem*capa || rem*e.capa == e.rem*capa && exp < e.exp {
		e.slot, e.rem, e.capa, e.exp, e.live = i, rem, capa, exp, true
	}
	return rem > 0 && rem >= capa-1
}

// evict drops one key to make room for h.
func (sh *shard) evict(t *table, h uint64, now int64) {
	e := evictor{t: t, sh: sh, now: now, slot: -1, newest: -1}
	if !e.recent() && !e.around(h) && e.rem == 0 {
		e.scan()
	}
	victim := e.slot
	if e.live {
		if e.rem == 0 {
			// every candidate is limited: the newest goes, so that a
			// flood of new keys evicts its own
			if e.newest >= 0 {
				victim = e.newest
			}
			t.store.limitedEvictions.Add(1)
		}
		t.store.evictions.Add(1)
	}
	sh.delete(t, victim)
}

// recent considers the shard's newest keys, newest first.
func (e *evictor) recent() bool {
	sh := e.sh
	for k := uint32(1); k <= recentSize; k++ {
		h := sh.recent[(sh.rpos-k)%recentSize]
		if h == 0 {
			continue
		}
		i := sh.find(h)
		if i < 0 {
			continue
		}
		if e.newest < 0 {
			e.newest = i
		}
		if e.consider(i) {
			return true
		}
	}
	return false
}

// around considers the probe run of h and a pseudo-random sample.
func (e *evictor) around(h uint64) bool {
	keys := e.sh.keys
	mask := len(keys) - 1
	i := int(h) & mask
	for seen := 0; keys[i] != 0 && seen < probeSize; seen++ {
		if e.consider(i) {
			return true
		}
		i = (i + 1) & mask
	}
	i = int(bits.RotateLeft64(h, 29)) & mask
	for found, visited := 0, 0; found < sampleSize && visited < len(keys); i, visited = (i+1)&mask, visited+1 {
		if keys[i] != 0 {
			found++
			if e.consider(i) {
				return true
			}
		}
	}
	return false
}

// scan considers up to scanSize more keys from where the last scan
// stopped, until one has quota left.
func (e *evictor) scan() {
	sh := e.sh
	mask := len(sh.keys) - 1
	i := int(sh.hand) & mask
	for found, visited := 0, 0; found < scanSize && visited < len(sh.keys); i, visited = (i+1)&mask, visited+1 {
		if sh.keys[i] != 0 {
			found++
			if e.consider(i) || e.rem > 0 {
				i = (i + 1) & mask
				break
			}
		}
	}
	sh.hand = uint32(i)
}
