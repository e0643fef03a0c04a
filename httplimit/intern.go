package httplimit

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/limitkit/limitkit/httplimit/internal/respond"
)

// The intern table turns a key assembled in a stack buffer into a string
// without allocating when the same key was seen recently: the hot path of a
// busy client. It is a direct-mapped cache of immutable entries, lock-free,
// bounded (internSlots pointers plus one entry per slot) and never swept: a
// new key simply replaces whatever shared its slot.
//
// Interned strings are real, immutable strings, so stores may keep them
// (as a write-back cache would) without risk.
const (
	internBits  = 14
	internSlots = 1 << internBits
	internMax   = 118 // longest key cached; longer keys are plainly allocated
)

type internEntry struct {
	n uint8
	b [internMax + 1]byte
}

type internTable struct {
	seed  maphash.Seed
	slots [internSlots]atomic.Pointer[internEntry]
}

var interned = &internTable{seed: maphash.MakeSeed()}

// intern returns b as a string, from the cache when possible. It does not
// retain b.
func (t *internTable) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > internMax {
		return string(b)
	}
	h := maphash.Bytes(t.seed, b)
	slot := &t.slots[h&(internSlots-1)]
	if e := slot.Load(); e != nil && int(e.n) == len(b) && string(e.b[:e.n]) == string(b) {
		return respond.BytesString(e.b[:len(b)])
	}
	e := new(internEntry)
	e.n = uint8(len(b))
	copy(e.b[:], b)
	slot.Store(e) // published after the bytes are written; never written again
	return respond.BytesString(e.b[:len(b)])
}
