package httplimit

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
)

// generalKey is what the engine's general path (no key cache) derives
// for req: the specification the cache must reproduce.
func generalKey(e *Engine, req Request) (string, keyStatus) {
	key, st, _ := e.generalKey(context.Background(), &e.checks[0], req)
	return key, st
}

// slot is p's slot in the key cache.
func (kc *keyCache) slot(engine uint64, p *KeyParts) *atomic.Pointer[keyEntry] {
	return &kc.slots[kc.ref(engine, p).i]
}

var (
	cacheMethods = []string{"GET", "POST", "PATCH", "FOO", "get", ""}
	cacheRoutes  = []string{"GET /a", "/users/:id", "/users/{id}", "", "example.com/x", "/a"}
	cachePeers   = []string{"203.0.113.7", "203.0.113.7:1", "203.0.113.7:2", "203.0.113.7:65536", "203.0.113.7:",
		"[2001:db8::1]", "2001:db8::1", "2001:db8::1:80", "[fe80::1%eth0]:80", "[fe80::1%eth0]", longPeer, longPeer + ":1", longPeer[:94] + "]:1", "203.0.113.8:1", "203.0.113.7", "[2001:db8::1]:443",
		"[2001:db8::2]:443", "[::ffff:192.0.2.1]:80", "", "garbage", "/tmp/app.sock", "010.0.0.1:1", "1.2.3.4:99999"}
)

// longPeer is a bracketed IPv6 address with a zone, 95 bytes long:
// keyfuncs parses it (at most 96), but not with a port.
var longPeer = "[fe80::1%" + strings.Repeat("z", 95-len("[fe80::1%]")) + "]"

// TestKeyCacheMatchesGeneralPath: for every method, route and peer
// tried, the first request (a miss, which fills the cache) and the
// second (a hit, where one is possible) get the general path's key and
// status; a request the general path cannot key is never cached.
func TestKeyCacheMatchesGeneralPath(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithScope("fixed")}, {WithNoKeySkip()}} {
		e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"), opts...)
		require.NoError(t, err)
		require.NotZero(t, e.cacheID, "the default key and scope are cached")
		for round := 0; round < 3; round++ {
			for _, m := range cacheMethods {
				for _, route := range cacheRoutes {
					for _, peer := range cachePeers {
						r, _ := http.NewRequest("GET", "http://example.com/x", nil)
						r.Method, r.Pattern, r.RemoteAddr = m, route, peer
						req := httpView{r}
						wantKey, wantSt := generalKey(e, req)
						key, st := e.cachedKey(context.Background(), &e.checks[0], req)
						require.Equalf(t, wantSt, st, "round %d %q %q %q", round, m, route, peer)
						require.Equalf(t, wantKey, key, "round %d %q %q %q", round, m, route, peer)
					}
				}
			}
		}
	}
}

// TestKeyCacheHitsReturningClient: a client's first request on a route
// only marks its slot, the second makes the entry (the key is the very
// string returned), later ones hit it; a new connection (a new port) is
// new parts; a client whose peer is not keyable is not cached.
func TestKeyCacheHitsReturningClient(t *testing.T) {
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"))
	require.NoError(t, err)
	req := httpReq("GET", "GET /hit", "198.51.100.9:4711")
	p := KeyParts{Route: "GET /hit", Peer: "198.51.100.9:4711", StableRoute: true}
	k1, _ := e.cachedKey(context.Background(), &e.checks[0], req)
	got, _ := keys.get(e.cacheID, &p)
	require.Empty(t, got, "one request: no entry")
	_, _ = e.cachedKey(context.Background(), &e.checks[0], req)
	got, _ = keys.get(e.cacheID, &p)
	require.Equal(t, "GET /hit|198.51.100.9", got)
	k3, _ := e.cachedKey(context.Background(), &e.checks[0], req)
	assert.Equal(t, unsafe.StringData(k1), unsafe.StringData(k3), "a hit returns the interned key")
	p2 := p
	p2.Peer = "198.51.100.9:4712"
	_, _ = e.cachedKey(context.Background(), &e.checks[0], httpReq("GET", "GET /hit", p2.Peer))
	got, _ = keys.get(e.cacheID, &p2)
	assert.Empty(t, got, "a new connection's first request: no entry")

	noPeer := httpReq("GET", "GET /hit", "")
	for i := 0; i < 3; i++ {
		_, st := e.cachedKey(context.Background(), &e.checks[0], noPeer)
		assert.Equal(t, keyDeny, st)
	}
	p.Peer = ""
	got, _ = keys.get(e.cacheID, &p)
	assert.Empty(t, got, "a request without a key is not cached")
}

// TestKeyCacheOneOffPartsAllocateNothing: parts seen once (a path
// scan, a client on one request) make no entry, so the cache adds no
// allocation to the general path's; a returning client allocates
// nothing at all.
func TestKeyCacheOneOffPartsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"))
	require.NoError(t, err)
	reqs := make([]Request, 300)
	for i := range reqs {
		reqs[i] = httpReq("GET", fmt.Sprintf("GET /p%d", i), "192.0.2.1:1")
	}
	for _, r := range reqs { // intern the keys: the general path's own allocation
		_, _ = generalKey(e, r)
	}
	i := 0
	assert.Equal(t, 0.0, testing.AllocsPerRun(len(reqs)-1, func() {
		_, _ = e.cachedKey(context.Background(), &e.checks[0], reqs[i])
		i++
	}))
	hot := httpReq("GET", "GET /hot", "192.0.2.1:1")
	_, _ = e.cachedKey(context.Background(), &e.checks[0], hot)
	_, _ = e.cachedKey(context.Background(), &e.checks[0], hot)
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		_, _ = e.cachedKey(context.Background(), &e.checks[0], hot)
	}))
}

// TestKeyCacheOnlyForTheDefaultKey: a key function, an IP resolver of
// the caller's, a scope function or a second check read more than the
// method, route and peer, so such engines do not use the cache.
func TestKeyCacheOnlyForTheDefaultKey(t *testing.T) {
	hk, err := keyfuncs.Header("X-Key")
	require.NoError(t, err)
	st := &keyStore{}
	for name, opts := range map[string][]Option{
		"key":        {WithKey(hk)},
		"resolver":   {WithIPKey(keyfuncs.PeerIP())},
		"scope func": {WithScopeFunc(func(keyfuncs.Request) string { return "s" })},
		"two checks": {WithCheck(limiter(t, st, "q"), hk)},
	} {
		e, err := newEngineNamed("x", limiter(t, st, "p"), opts...)
		require.NoError(t, err, name)
		assert.Zero(t, e.cacheID, name)
	}
}

// reusedView is a request view over one reused buffer, as fasthttp's
// strings are: its KeyParts are not Stable.
type reusedView struct {
	Request
	buf   []byte
	route string
}

func (v *reusedView) Route() string { return v.route }

// AnyMethod: a framework's route, registered under one method.
func (v *reusedView) AnyMethod() bool { return false }

func (v *reusedView) KeyParts(route bool) (KeyParts, bool) {
	return KeyParts{Method: "GET", Route: v.route, Peer: v.RemoteAddr()}, true
}

// TestKeyCacheCopiesReusedParts: an entry made from a view of a reused
// buffer keeps its own copy, so rewriting the buffer for the next
// request (another route, one that shares the first one's slot, the
// worst case) does not make the old entry answer for it.
func TestKeyCacheCopiesReusedParts(t *testing.T) {
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"))
	require.NoError(t, err)
	const peer = "192.0.2.10:1"
	seen := map[*atomic.Pointer[keyEntry]]string{}
	var r1, r2 string
	for i := 0; r1 == ""; i++ {
		r := fmt.Sprintf("/r%05d", i)
		s := keys.slot(e.cacheID, &KeyParts{Method: "GET", Route: r, Peer: peer})
		if prev, ok := seen[s]; ok {
			r1, r2 = prev, r
		}
		seen[s] = r
	}
	v := &reusedView{Request: httpReq("GET", "", peer), buf: make([]byte, len(r1))}
	set := func(s string) {
		copy(v.buf, s)
		v.route = unsafe.String(&v.buf[0], len(v.buf))
	}
	for i := 0; i < 3; i++ {
		for _, r := range []string{r1, r2} {
			other := r2
			if r == r2 {
				other = r1
			}
			set(r)
			want, _ := generalKey(e, v)
			require.Equal(t, "GET "+r+"|192.0.2.10", want)
			for j := 0; j < 2; j++ { // the second request makes the entry
				got, _ := e.cachedKey(context.Background(), &e.checks[0], v)
				require.Equal(t, want, got, "round %d route %s", i, r)
			}
			set(other) // the next request rewrites the buffer: same slot
			got, _ := e.cachedKey(context.Background(), &e.checks[0], v)
			require.Equal(t, "GET "+other+"|192.0.2.10", got, "round %d after %s", i, r)
		}
	}
}

// TestKeyCacheSlotCollision: parts that share a slot replace each
// other's entry and each still gets its own key, alternating.
func TestKeyCacheSlotCollision(t *testing.T) {
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"))
	require.NoError(t, err)
	seen := map[*byte]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		peer := fmt.Sprintf("10.%d.%d.1:80", i>>8, i&255)
		p := KeyParts{Method: "GET", Route: "GET /c", Peer: peer}
		s := keys.slot(e.cacheID, &p)
		k := (*byte)(unsafe.Pointer(s))
		if prev, ok := seen[k]; ok {
			a, b = prev, peer
		}
		seen[k] = peer
	}
	for i := 0; i < 4; i++ {
		for _, peer := range []string{a, b} {
			v := &reusedView{Request: httpReq("GET", "", peer), route: "GET /c"}
			got, st := e.cachedKey(context.Background(), &e.checks[0], v)
			require.Equal(t, keyOK, st)
			want, _ := generalKey(e, v)
			require.Equal(t, want, got)
		}
	}
}

// TestKeyCacheConcurrent: many goroutines asking for a few clients on a
// few routes, through one engine, each get their own key (-race checks
// the entries' publication).
func TestKeyCacheConcurrent(t *testing.T) {
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				route := fmt.Sprintf("GET /r%d", (i+g)%3)
				peer := fmt.Sprintf("192.0.2.%d:%d", (i*7+g)%5, 1000+g)
				r, _ := http.NewRequest("GET", "http://example.com/", nil)
				r.Pattern, r.RemoteAddr = route, peer
				key, st := e.cachedKey(context.Background(), &e.checks[0], httpView{r})
				if st != keyOK || key != route+"|"+peer[:len(peer)-5] {
					t.Errorf("%s %s: got %q (%d)", route, peer, key, st)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestKeyCacheLongPartsNotCached: parts longer than an entry holds are
// decided by the general path each time, and the table does not keep
// them.
func TestKeyCacheLongPartsNotCached(t *testing.T) {
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"))
	require.NoError(t, err)
	route := "/" + string(make([]byte, keyCacheMax))
	req := httpReq("GET", route, "192.0.2.1:1")
	want, _ := generalKey(e, req)
	got, _ := e.cachedKey(context.Background(), &e.checks[0], req)
	assert.Equal(t, want, got)
	p := KeyParts{Method: "GET", Route: route, Peer: "192.0.2.1:1", StableRoute: true}
	k, _ := keys.get(e.cacheID, &p)
	assert.Empty(t, k)
}

// TestKeyCacheSkipsFallbackKeys: a request the default key cannot key
// gets the fallback key, which reads more than the parts (a header
// here): it is not cached, so two such requests with different headers
// keep different keys.
func TestKeyCacheSkipsFallbackKeys(t *testing.T) {
	hk, err := keyfuncs.Header("X-Key")
	require.NoError(t, err)
	e, err := newEngineNamed("x", limiter(t, &keyStore{}, "p"), WithFallbackKey(hk))
	require.NoError(t, err)
	require.NotZero(t, e.cacheID)
	for i := 0; i < 3; i++ {
		for _, h := range []string{"alice", "bob"} {
			r, _ := http.NewRequest("GET", "http://example.com/x", nil)
			r.Pattern, r.RemoteAddr = "GET /x", ""
			r.Header.Set("X-Key", h)
			key, st := e.cachedKey(context.Background(), &e.checks[0], httpView{r})
			require.Equal(t, keyOK, st)
			require.Equal(t, "GET /x|"+fallbackPrefix+h, key)
		}
	}
}

// TestKeyCacheHashResistsChosenParts: parts a client picks (fiber's path
// under app.Use) cannot zero a factor of the hash's multiplications
// (wyhash's weak spot with a public constant): 1,000 paths whose second
// word is that constant spread over the slots instead of sharing one.
func TestKeyCacheHashResistsChosenParts(t *testing.T) {
	var tail [8]byte
	binary.LittleEndian.PutUint64(tail[:], 0xe7037ed1a0b428db)
	slots := map[*atomic.Pointer[keyEntry]]bool{}
	for i := 0; i < 1000; i++ {
		path := fmt.Sprintf("/%07d", i) + string(tail[:])
		slots[keys.slot(1, &KeyParts{Method: "GET", Route: path, PeerIP: 1<<32 | 7})] = true
	}
	assert.Greater(t, len(slots), 900, "distinct slots of 1,000 chosen paths")
}

// TestKeyCacheComparesMethod: methods of one length with the same first
// and last byte (GET and GXT, POST and PUST) hash alike, so on one
// connection to a method-less net/http pattern they share a slot; the
// entry's method compare is all that keeps the unknown method (scoped
// OTHER) from being keyed under the known one's scope.
func TestKeyCacheComparesMethod(t *testing.T) {
	// Parts carry the request's own method where a view gives it (fiber
	// under app.Use: the method and the path choose the route), and the
	// hash folds in only a method's length and first and last bytes, so
	// GET and GXT on one peer and path share a slot: only the entry's
	// full compare keeps one from answering for the other.
	id := engineIDs.Add(1)
	const peer, path = "192.0.2.77:5150", "/m"
	for _, pair := range [][2]string{{"GET", "GXT"}, {"POST", "PUST"}} {
		a, b := pair[0], pair[1]
		pa := KeyParts{Method: a, Route: path, Peer: peer, Table: 7}
		pb := KeyParts{Method: b, Route: path, Peer: peer, Table: 7}
		require.Equal(t, keys.ref(id, &pa), keys.ref(id, &pb), "%s and %s share a slot", a, b)
		want := a + " /m|192.0.2.77"
		for i := 0; i < 2; i++ { // an entry is made at the second miss
			got, slot := keys.get(id, &pa)
			if got == "" {
				keys.put(slot, id, &pa, want)
			}
		}
		got, _ := keys.get(id, &pa)
		require.Equal(t, want, got, "%s has its entry", a)
		got, _ = keys.get(id, &pb)
		assert.Empty(t, got, "%s was answered by %s's entry", b, a)
	}
}

// TestDecideParts: a returning client's parts decide as without them
// does (the same store key and result); parts the cache does not know
// decide nothing without the view, and on the general path with it
// (caching the key); nothing is decided by every engine whose key is not a function of
// the parts (skip and cost functions, a key function, tiers, two checks);
// under WithScope the parts leave the route out.
func TestDecideParts(t *testing.T) {
	ctx := context.Background()
	st := &keyStore{}
	e, err := newEngineNamed("x", limiter(t, st, "p"))
	require.NoError(t, err)
	ok, route := e.PartsKeyed()
	require.True(t, ok)
	require.True(t, route)
	req := httpReq("GET", "GET /parts", "198.51.100.9:4711")
	p := KeyParts{Route: "GET /parts", Peer: "198.51.100.9:4711", StableRoute: true}
	var res Result
	require.False(t, e.Decide(ctx, nil, &p, &res), "unknown parts")
	require.Equal(t, Result{}, res)
	var want Result
	for i := 0; i < 2; i++ { // an entry at the second miss
		want = Result{}
		e.Decide(ctx, req, nil, &want)
	}
	wantKey := st.last()
	require.True(t, e.Decide(ctx, nil, &p, &res))
	assert.Equal(t, wantKey, st.last())
	assert.Equal(t, "GET /parts|198.51.100.9", st.last())
	res.now, want.now = time.Time{}, time.Time{}
	assert.Equal(t, want, res)

	// with the view, a miss decides on the general path and fills the cache
	req2 := httpReq("GET", "GET /parts", "198.51.100.9:4712")
	p2 := KeyParts{Route: "GET /parts", Peer: "198.51.100.9:4712", StableRoute: true}
	for i := 0; i < 2; i++ {
		res = Result{}
		require.True(t, e.Decide(ctx, req2, &p2, &res))
		assert.Equal(t, "GET /parts|198.51.100.9", st.last())
		assert.True(t, res.decided)
	}
	res = Result{}
	assert.True(t, e.Decide(ctx, nil, &p2, &res), "cached by the calls with the view")

	hk, err := keyfuncs.Header("X-Key")
	require.NoError(t, err)
	for name, opts := range map[string][]Option{
		"skip":       {WithSkip(func(keyfuncs.Request) bool { return false })},
		"cost":       {WithCost(func(keyfuncs.Request) int64 { return 1 })},
		"key":        {WithKey(hk)},
		"tiers":      {WithTiers(func(keyfuncs.Request) (string, error) { return "", nil }, map[string]*core.Limiter{"t": limiter(t, st, "t")})},
		"two checks": {WithCheck(limiter(t, st, "q"), hk)},
	} {
		e, err := newEngineNamed("x", limiter(t, st, "p"), opts...)
		require.NoError(t, err, name)
		ok, _ := e.PartsKeyed()
		assert.False(t, ok, name)
		for i := 0; i < 3; i++ {
			e.Decide(ctx, req, nil, &Result{})
		}
		assert.False(t, e.Decide(ctx, nil, &p, &res), name)
		var viewed Result
		assert.True(t, e.Decide(ctx, req, &p, &viewed), "%s: with the view, decided on the general path", name)
		assert.NotEmpty(t, viewed.Decision.Policy, name)
	}
	e, err = newEngineNamed("x", limiter(t, st, "p"), WithScope("s"))
	require.NoError(t, err)
	ok, route = e.PartsKeyed()
	assert.True(t, ok)
	assert.False(t, route)
}

// TestHashStringEveryByte: every byte of a part, at every length up to
// several rounds of the loop, changes its hash (a byte the hash skipped
// would put parts that differ only there in one slot every time).
func TestHashStringEveryByte(t *testing.T) {
	const seed = 0x243f6a8885a308d3
	for n := 1; n <= 80; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		h := hashString(seed, string(b))
		for i := range b {
			c := append([]byte(nil), b...)
			c[i] ^= 0x10
			if hashString(seed, string(c)) == h {
				t.Fatalf("length %d: byte %d does not change the hash", n, i)
			}
		}
	}
}
