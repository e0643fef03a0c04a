package httplimit

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/limitkit/limitkit/httplimit/internal/respond"
)

// The key cache skips building the store key of the common middleware
// (one check, the default peer-IP key, the route scope or a fixed one)
// when the same client asked the same route recently. Such a key is a
// function of the engine, the request's method, its route and its TCP
// peer and of nothing else, so a table from those parts to the key,
// filled by the general path, answers for them: a hash of two short
// strings and three compares instead of formatting the scope, parsing
// the peer address and interning the result.
//
// Like the intern table it is direct-mapped, lock-free and bounded
// (keyCacheSlots pointers and miss marks plus one immutable entry per
// slot: at most about 400 bytes a slot with the key it holds, 6.5 MB in
// all, whatever clients send). Parts get an entry on their second miss
// in a row in their slot, so one-off parts (a client's only request on
// a connection, a scan of paths under fiber's app.Use) cost a hash and
// an atomic swap and allocate nothing; a returning client's entry costs
// two small allocations once. A new entry replaces whatever shared its
// slot. Entries hold copies of their parts (never the request's bytes),
// parts longer than keyCacheMax are not cached, and entries are compared
// in full, so a collision or a stale slot costs a miss, never another
// client's key.
const (
	keyCacheBits  = 14
	keyCacheSlots = 1 << keyCacheBits
	keyCacheMax   = 160 // longest method + route + peer cached
)

// KeyParts is what a request's default store key is a function of, given
// the engine: the scope's method ("" for a route that
// accepts every method, HEAD as GET) and the route, and the TCP peer as
// RemoteAddr's text or, when Peer is "", as PeerIP (an IPv4 address in
// the low 32 bits, with bit 32 set). Table, when not zero, names the
// router's state the other parts are read in, a number never used for
// another: a route table that resolves Route, a path, to its route
// (fiberlimit under app.Use), or the router's registrations
// ([AnyRoutes.ID]) that say whether Route accepts every method. With a
// Table that says the latter, or a route that names its method, a view
// may give the request's own method instead of the scope's, at the cost
// of one entry per method.
//
// StableRoute says that Route is a router's own pattern string, the same
// string for every request of the route (net/http's Pattern, gin's
// FullPath, echo's Path): the cache then finds it by its address instead
// of hashing its bytes. Every part is compared in full and copied into
// the entry either way, so a view that breaks this promise costs misses,
// never a wrong key, and the cache never holds a request's memory.
type KeyParts struct {
	Table       uint64
	Method      string
	Route       string
	Peer        string
	PeerIP      uint64
	StableRoute bool
}

// KeyParter is implemented by request views that give their KeyParts
// cheaper than Method, Route and RemoteAddr would: fiberlimit's (its
// route under app.Use is a table lookup, its peer a net.Addr), ginlimit's
// and echolimit's (one pass over the context). With route false the
// scope is fixed and Method, Route and Table are not needed. ok is false
// when the parts cannot stand for the request (a peer that is not IPv4,
// say): the general path then decides. Views without it give Method,
// Route and RemoteAddr, with StableRoute. Peer keeps the port (finding
// it costs more than it saves): a client's entry serves one connection,
// and a client that connects anew for every request is never cached (its
// parts never repeat) and costs the general path plus a hash.
type KeyParter interface {
	KeyParts(route bool) (p KeyParts, ok bool)
}

type keyEntry struct {
	engine uint64
	table  uint64
	peerIP uint64
	method string
	route  string
	peer   string
	key    string // the store key (interned: a real, immutable string)
}

type keyCache struct {
	seed   uint64
	slots  [keyCacheSlots]atomic.Pointer[keyEntry]
	missed [keyCacheSlots]atomic.Uint64 // the hash of each slot's last miss
}

var keys = &keyCache{seed: maphash.Comparable(maphash.MakeSeed(), 0)}

// engineIDs numbers engines for the key cache: an id is never reused, so
// an entry of a collected engine never answers for a new one.
var engineIDs atomic.Uint64

func (kc *keyCache) hash(engine uint64, p *KeyParts) uint64 {
	h := kc.seed ^ engine*0x9e3779b97f4a7c15 ^ p.Table ^ p.PeerIP<<7
	if m := p.Method; m != "" {
		// GET and PUT, HEAD and POST differ here (net/http's Method is a
		// new string per request: its address says nothing)
		h ^= (uint64(len(m))<<16 | uint64(m[0])<<8 | uint64(m[len(m)-1])) << 40
	}
	if p.StableRoute {
		h = mix(h, uint64(len(p.Route)), uint64(respond.StringAddr(p.Route)))
	} else {
		h = hashString(h, p.Route)
	}
	// the peer by content: a RemoteAddr rewritten per request (a
	// real-IP middleware) is a new string each time
	h = hashString(h, p.Peer)
	return h
}

// ref is where p's entry goes: its slot and its full hash.
func (kc *keyCache) ref(engine uint64, p *KeyParts) slotRef {
	h := kc.hash(engine, p)
	return slotRef{i: h >> (64 - keyCacheBits), h: h}
}

// slotRef is where get looked: the slot and the parts' full hash.
type slotRef struct {
	i uint64
	h uint64
}

// hashString folds s into h, sixteen bytes at a time: for the short
// parts of a key, a few multiplications where maphash's call and setup
// cost more than the hashing. Both factors of every multiplication
// depend on the running hash, which starts from the random kc.seed, so a
// client cannot zero one of them (wyhash's weak spot with a known
// constant) or otherwise pick parts that share a slot without the seed;
// and a collision costs only a miss, since entries are compared in full.
func hashString(h uint64, s string) uint64 {
	b := respond.StringBytes(s)
	h ^= uint64(len(b)) * 0x9e3779b97f4a7c15
	for len(b) > 32 {
		h = mix(h, binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]))
		b = b[16:]
	}
	// the last 1 to 32 bytes as two words (overlapping when over 8) or,
	// over 16, four (the last two overlapping the first): an IPv4 peer's
	// RemoteAddr in two multiplications, without the loop
	var x, y uint64
	switch n := len(b); {
	case n > 16:
		h = mix(h, binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]))
		x, y = binary.LittleEndian.Uint64(b[n-16:]), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 8:
		x, y = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		x, y = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		x = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	return mix(h, x, y)
}

// mix folds the words x and y into h: a 128-bit product of two factors
// that both carry h, folded to 64 bits (wyhash's multiply-fold).
func mix(h, x, y uint64) uint64 {
	hi, lo := bits.Mul64(h^x^0xa0761d6478bd642f, bits.RotateLeft64(h, 32)^y^0xe7037ed1a0b428db)
	return hi ^ lo
}

// get returns the cached key of p for engine, or "", and where it looked.
func (kc *keyCache) get(engine uint64, p *KeyParts) (string, slotRef) {
	r := kc.ref(engine, p)
	if e := kc.slots[r.i].Load(); e != nil && e.engine == engine && e.table == p.Table && e.peerIP == p.PeerIP &&
		e.route == p.Route && e.peer == p.Peer && e.method == p.Method {
		return e.key, r
	}
	return "", r
}

// put caches key for p, whose get missed at r, when the same parts also
// missed there the time before (the slot's last miss had their hash): a
// returning client gets an entry at its second request, while one-off
// parts (a client scanning paths under fiber's app.Use, say) cost an
// atomic swap and no allocation. The parts are copied: they may live in
// a reused buffer (fasthttp's) or be a small part of a large allocation
// (a RemoteAddr cut from an X-Forwarded-For header), which an entry must
// not keep.
func (kc *keyCache) put(r slotRef, engine uint64, p *KeyParts, key string) {
	if len(p.Method)+len(p.Route)+len(p.Peer) > keyCacheMax || key == "" {
		return
	}
	if kc.missed[r.i].Swap(r.h) != r.h {
		return
	}
	buf := make([]byte, 0, len(p.Method)+len(p.Route)+len(p.Peer))
	buf = append(append(append(buf, p.Method...), p.Route...), p.Peer...)
	all := respond.BytesString(buf) // never written again
	m, n := len(p.Method), len(p.Method)+len(p.Route)
	kc.slots[r.i].Store(&keyEntry{
		engine: engine, table: p.Table, peerIP: p.PeerIP, key: key,
		method: all[:m], route: all[m:n], peer: all[n:],
	})
}
