package httplimit

import "sync/atomic"

// AnyRoutes says which route patterns of one router are registered under
// every method of a set (the methods gin's r.Any or echo's e.Any
// registers): the routes whose default scope is the route alone (see
// [ScopeMethod]). It holds every pattern the router had when it was
// built, so a pattern it does not know is a route registered later.
// Immutable.
type AnyRoutes struct {
	owner any
	paths map[string]bool // every registered pattern: true when under every method
}

// BuildAnyRoutes indexes the registrations that each calls yield with
// (method, pattern) for the router owner: a pattern is method-agnostic
// when it is registered under every one of methods.
func BuildAnyRoutes(owner any, methods []string, each func(yield func(method, pattern string))) *AnyRoutes {
	want := make(map[string]bool, len(methods))
	for _, m := range methods {
		want[m] = true
	}
	seen := map[string]map[string]bool{}
	each(func(m, p string) {
		if seen[p] == nil {
			seen[p] = map[string]bool{}
		}
		if want[m] {
			seen[p][m] = true
		}
	})
	a := &AnyRoutes{owner: owner, paths: make(map[string]bool, len(seen))}
	for p, ms := range seen {
		a.paths[p] = len(ms) == len(want)
	}
	return a
}

// AnyRouteIndex holds the AnyRoutes of the routers a process serves, at
// most len(slots) of them at once (more take turns: time, never a wrong
// answer). The zero value is ready; it is safe for concurrent use.
type AnyRouteIndex struct {
	slots [8]atomic.Pointer[AnyRoutes]
	next  atomic.Uint32
}

// AnyMethod reports whether pattern is registered under every method on
// owner, building owner's AnyRoutes with build(owner) when it is not held
// or does not know pattern (a route registered after it was built). A
// pattern still unknown after a rebuild (one the router's listing does
// not name) is recorded as method-specific, so it costs one rebuild, not
// one per request. Patterns come from the router, never from the client,
// so the index is bounded by the routes.
func (x *AnyRouteIndex) AnyMethod(owner any, pattern string, build func(owner any) *AnyRoutes) bool {
	slot := -1
	for i := range x.slots {
		a := x.slots[i].Load()
		if a == nil {
			break // slots fill in order
		}
		if a.owner == owner {
			if v, ok := a.paths[pattern]; ok {
				return v
			}
			slot = i
			break
		}
	}
	a := build(owner)
	v, ok := a.paths[pattern]
	if !ok {
		a.paths[pattern] = false // a is not shared yet
	}
	if slot < 0 {
		slot = int((x.next.Add(1) - 1) % uint32(len(x.slots)))
	}
	x.slots[slot].Store(a)
	return v
}
