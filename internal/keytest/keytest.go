// Package keytest holds what the adapters' key tests share: a store that
// admits every request and records the key it was asked for, so that a
// test can compare the store keys of two middlewares (one using the
// engine's key cache, one not) request by request.
package keytest

import (
	"context"
	"sync"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Scope is the scope an engine without WithScope or WithScopeFunc gives
// req, built from httplimit's public pieces (a net/http request and a
// route that accepts every method scope by route alone, see
// httplimit.RouteScope): a middleware built with
// httplimit.WithScopeFunc(Scope) keys as the default one does but never
// uses the key cache, so a test can compare the two. Were it to drift
// from the engine's default scope, the comparing tests would fail.
func Scope(req keyfuncs.Request) string {
	route := req.Route()
	// an empty request method is "OTHER" (not a route of every method,
	// which is what RouteScope reads "" as)
	method := req.Method()
	if method == "" {
		method = "OTHER"
	}
	if r, ok := req.(httplimit.Request); ok && r.AnyMethod() {
		method = ""
	}
	return httplimit.RouteScope(method, route)
}

// Rec is a core.Store that admits everything and records "policy#key"
// for every Take. The zero value is ready; it is safe for concurrent use.
type Rec struct {
	mu   sync.Mutex
	keys []string
}

// Take implements core.Store.
func (s *Rec) Take(_ context.Context, key string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, p.Name+"#"+key)
	s.mu.Unlock()
	return core.Decision{Allowed: true, Limit: p.Limits[0], Remaining: 1, Policy: p.Name}, nil
}

// Keys returns and forgets the keys recorded so far.
func (s *Rec) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	s.keys = nil
	return k
}
