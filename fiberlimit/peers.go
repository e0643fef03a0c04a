package fiberlimit

import (
	"hash/maphash"
	"sync/atomic"
)

// peers turns a peer address rendered in a stack buffer ("ip:port") into
// a string without allocating when the same peer was rendered recently:
// a direct-mapped cache of immutable strings, lock-free, bounded
// (peerSlots pointers and one string each) and never swept; a new peer
// replaces whatever shared its slot. Its strings are ordinary immutable
// strings, so a store may keep them.
type peerCache struct {
	seed  maphash.Seed
	slots [peerSlots]atomic.Pointer[string]
}

const (
	peerSlots = 1 << 12
	peerMax   = 64 // longest address cached ("[v6%zone]:port" fits); longer ones are plainly allocated
)

var peers = &peerCache{seed: maphash.MakeSeed()}

// intern returns b as a string, from the cache when it holds the same
// bytes. It does not retain b.
func (pc *peerCache) intern(b []byte) string {
	if len(b) == 0 || len(b) > peerMax {
		return string(b)
	}
	slot := &pc.slots[maphash.Bytes(pc.seed, b)&(peerSlots-1)]
	if s := slot.Load(); s != nil && *s == string(b) {
		return *s
	}
	s := string(b)
	slot.Store(&s)
	return s
}
