package httplimit

import (
	"slices"
	"sync/atomic"

	"github.com/limitkit/limitkit/httplimit/internal/respond"
)

// routeTable says which route patterns of one router are registered
// under every method of a set (the methods gin's r.Any or echo's e.Any
// registers). It holds every pattern the router had when it was built, so
// a pattern it does not know is a route registered later. Immutable.
type routeTable[R comparable] struct {
	owner R
	id    uint64
	paths map[string]bool // every registered pattern: true when under every method
}

// anyRoutesIDs numbers the routeTables: an id is never reused.
var anyRoutesIDs atomic.Uint64

// buildTable indexes the registrations that each calls yield with
// (method, pattern) for the router owner: a pattern is method-agnostic
// when it is registered under every one of methods.
func buildTable[R comparable](owner R, methods []string, each func(owner R, yield func(method, pattern string))) *routeTable[R] {
	want := make(map[string]bool, len(methods))
	for _, m := range methods {
		want[m] = true
	}
	seen := map[string]map[string]bool{}
	each(owner, func(m, p string) {
		if seen[p] == nil {
			seen[p] = map[string]bool{}
		}
		if want[m] {
			seen[p][m] = true
		}
	})
	a := &routeTable[R]{owner: owner, id: anyRoutesIDs.Add(1), paths: make(map[string]bool, len(seen))}
	for p, ms := range seen {
		a.paths[p] = len(ms) == len(want)
	}
	return a
}

// AnyRoutes says which route patterns of the routers a process serves are
// registered under every method of a set (the methods gin's r.Any or
// echo's e.Any registers): the routes whose default scope is the route
// alone, for an adapter's [Request.AnyMethod]. It indexes each router's
// registrations once (again when a pattern it does not know shows up: a
// route registered later), holds those of at most 8 routers at once (more
// take turns: time, never a wrong answer), and remembers the answers per
// pattern string (see facts). R is the router's type (*gin.Engine,
// *echo.Echo): a comparable identity, compared per request without an
// interface. Build one with [NewAnyRoutes]; it is safe for concurrent use.
type AnyRoutes[R comparable] struct {
	methods []string
	each    func(owner R, yield func(method, pattern string))
	slots   [8]atomic.Pointer[routeTable[R]]
	next    atomic.Uint32
	// facts answers a pattern the router gave before from the very same
	// string (its address and length: the router's own string, immutable,
	// which the fact keeps alive so that no other string can take its
	// address) without hashing it, while the routeTable that answered are
	// still the owner's in the index: one load and three compares where a
	// map lookup of the text cost about three times as much.
	facts  [factSlots]atomic.Pointer[routeFact[R]]
	missed [factSlots]atomic.Uintptr // the address of each slot's last miss
}

// factSlots bounds the facts of one index: a fact is a pointer and a
// small struct, and patterns beyond it take turns (time, never a wrong
// answer).
const factSlots = 256

// routeFact is what the index answered for one pattern string.
type routeFact[R comparable] struct {
	routes  *routeTable[R] // the owner's routes that answered
	slot    int            // where routes are held in the index's slots
	pattern string         // the router's string; its address names it
	any     bool
}

// factSlot is where the facts of pattern's string go.
func factSlot(pattern string) uint64 {
	h := (uint64(respond.StringAddr(pattern)) ^ uint64(len(pattern))) * 0x9e3779b97f4a7c15
	return h >> (64 - 8)
}

// NewAnyRoutes returns the index of the routers whose registrations each
// calls yield with (method, pattern) for the router owner (gin: every
// RouteInfo of owner.Routes()): a pattern is method-agnostic when it is
// registered under every one of methods. each runs on the request path
// when a router is first seen or a pattern is unknown, possibly on several
// goroutines at once (each call with its own yield); it must not panic.
// methods is copied.
func NewAnyRoutes[R comparable](methods []string, each func(owner R, yield func(method, pattern string))) *AnyRoutes[R] {
	return &AnyRoutes[R]{methods: slices.Clone(methods), each: each}
}

// build indexes owner's registrations.
func (x *AnyRoutes[R]) build(owner R) *routeTable[R] { return buildTable(owner, x.methods, x.each) }

// AnyMethod reports whether pattern is registered under every method on
// owner, indexing owner's registrations when they are not held
// or does not know pattern (a route registered after it was built). A
// pattern still unknown after a rebuild (one the router's listing does
// not name) is recorded as method-specific, so it costs one rebuild, not
// one per request. Patterns come from the router, never from the client,
// so the index is bounded by the routes; pattern must be the router's own
// string for the route (the same immutable string every request), which
// the index may keep.
func (x *AnyRoutes[R]) AnyMethod(owner R, pattern string) bool {
	i := factSlot(pattern)
	if f := x.facts[i].Load(); f != nil && respond.StringAddr(f.pattern) == respond.StringAddr(pattern) &&
		len(f.pattern) == len(pattern) && x.slots[f.slot].Load() == f.routes && f.routes.owner == owner {
		return f.any
	}
	a, slot, v := x.lookup(owner, pattern)
	// a fact on the pattern's second miss in a row in its slot: patterns
	// taking turns in one slot cost the lookup, never an allocation each
	if p := respond.StringAddr(pattern); x.missed[i].Swap(p) == p {
		x.facts[i].Store(&routeFact[R]{routes: a, slot: slot, pattern: pattern, any: v})
	}
	return v
}

// Table is a number that names owner's registrations as the index holds
// them (indexing them when it holds none), which no other router's and no
// later indexing of owner's has: a view that gives the request's own
// method in its [KeyParts] puts it in Table, so that the key cache's
// entries are those of these routes (whether the route accepts every
// method is a function of them and the route).
func (x *AnyRoutes[R]) Table(owner R) uint64 {
	if a := x.slots[0].Load(); a != nil && a.owner == owner {
		return a.id // a process's first router: no loop to set up
	}
	return x.routes(owner).id
}

// routes is Table past the first slot.
func (x *AnyRoutes[R]) routes(owner R) *routeTable[R] {
	for i := range x.slots {
		a := x.slots[i].Load()
		if a == nil {
			break // slots fill in order
		}
		if a.owner == owner {
			return a
		}
	}
	a := x.build(owner)
	x.slots[x.nextSlot()].Store(a)
	return a
}

func (x *AnyRoutes[R]) nextSlot() int {
	return int((x.next.Add(1) - 1) % uint32(len(x.slots)))
}

// lookup is AnyMethod without the facts: the owner's routeTable, where
// they are held, and the answer.
func (x *AnyRoutes[R]) lookup(owner R, pattern string) (*routeTable[R], int, bool) {
	slot := -1
	for i := range x.slots {
		a := x.slots[i].Load()
		if a == nil {
			break // slots fill in order
		}
		if a.owner == owner {
			if v, ok := a.paths[pattern]; ok {
				return a, i, v
			}
			slot = i
			break
		}
	}
	a := x.build(owner)
	v, ok := a.paths[pattern]
	if !ok {
		a.paths[pattern] = false // a is not shared yet
	}
	if slot < 0 {
		slot = x.nextSlot()
	}
	x.slots[slot].Store(a)
	return a, slot, v
}
