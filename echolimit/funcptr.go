package echolimit

import (
	"sync/atomic"
	"unsafe"

	"github.com/labstack/echo/v4"
)

// This file holds echolimit's one framework trick, the identity of a Go
// function value, which echo's public API has no other way to tell: the
// cache of the handler the middleware builds (echo applies e.Use
// middleware to each request anew) and the code pointer that tells echo's
// "no route" handlers. The rest of the adapter uses echo's public API
// only; funcptr_test.go measures what each trick buys against the safe
// spelling (building the handler anew, reflect.Value.Pointer).

// echo applies e.Use middleware per request (echo.applyMiddleware), so
// the handler a middleware returns would be a new closure every request.
// Its next handler, though, is mostly the same each time: the route's
// handler, registered once. wrapCache keeps the handler built for each
// next handler seen recently, keyed by the identity of next's closure
// (the pointer of a Go function value, which the cache keeps alive, so
// an equal pointer is the same closure), and returns it again instead of
// allocating. A next handler that is itself new every request (a
// middleware registered after this one that does not cache) never hits;
// an entry that was never reused is then not replaced, so such requests
// cost the one allocation they did before and no more.
type wrapCache struct {
	slots [wrapSlots]atomic.Pointer[wrapEntry]
}

const wrapSlots = 64

type wrapEntry struct {
	next unsafe.Pointer // next's closure: keeps it alive
	h    echo.HandlerFunc
	used atomic.Bool // returned again at least once
}

// funcPtr is the pointer of a function value: its closure.
func funcPtr(f echo.HandlerFunc) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&f)) }

// middleware is build behind the cache: echo calls it per request.
func (wc *wrapCache) middleware(build echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if h := wc.hit(next); h != nil {
			return h
		}
		return wc.miss(next, build)
	}
}

// hit is the handler built for next when its entry has been returned
// before, else nil; small enough to inline where echo calls the
// middleware.
func (wc *wrapCache) hit(next echo.HandlerFunc) echo.HandlerFunc {
	p := funcPtr(next)
	if e := wc.slots[(uintptr(p)>>4)%wrapSlots].Load(); e != nil && e.next == p && e.used.Load() {
		return e.h // entries hold no nil next
	}
	return nil
}

// miss is the handler for next when hit finds none: an entry's, or
// build's.
func (wc *wrapCache) miss(next echo.HandlerFunc, build echo.MiddlewareFunc) echo.HandlerFunc {
	p := funcPtr(next)
	if p == nil {
		return build(next)
	}
	slot := &wc.slots[(uintptr(p)>>4)%wrapSlots]
	e := slot.Load()
	if e != nil && e.next == p {
		if !e.used.Load() {
			e.used.Store(true)
		}
		return e.h
	}
	h := build(next)
	if e == nil || e.used.Load() {
		slot.Store(&wrapEntry{next: p, h: h})
	}
	return h
}

// codePtr is the code pointer of a function value, what
// reflect.Value.Pointer returns for it (two functions with the same code
// compare equal), 0 for nil, read as reflect reads it (a func value
// points at its closure, whose first word is the code) without reflect's
// overhead: three reflect calls per request cost about as much as the
// rest of the route's key parts. TestUnrouted (view_test.go) checks it
// against reflect on every build.
func codePtr(f echo.HandlerFunc) uintptr {
	p := funcPtr(f)
	if p == nil {
		return 0
	}
	return *(*uintptr)(p)
}
