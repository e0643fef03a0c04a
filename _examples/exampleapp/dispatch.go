package exampleapp

import (
	"errors"
	"fmt"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rules"
)

// Dispatch hands each request to the adapter middleware of its rule. The
// rules, their limiters and their middlewares form one [rules.Snapshot],
// replaced as a whole when the rules file is reloaded: a request acquires
// a snapshot once, matches its rule and is decided in it, and releases it
// when done, so that it is decided wholly by one set of rules.
//
//	snap := d.Acquire()
//	defer snap.Release()
//	if mw, ok := d.Middleware(snap, view, route); ok {
//		// run the request through mw
//	}
//
// A Dispatch is safe for concurrent use.
type Dispatch[M any] struct{ a *App }

// NewDispatch builds every rule's middleware with an adapter's
// NewMiddleware (nethttp.NewMiddleware, ginlimit.NewMiddleware, ...) and
// the options the rule asks for (serve.RuleOptions), now and at each reload. An App has one
// Dispatch; a second is an error.
func NewDispatch[M any](a *App, newMW func(*core.Limiter, ...nethttp.Option) (M, error)) (*Dispatch[M], error) {
	return newDispatch(a, func(l *core.Limiter, opts ...nethttp.Option) (M, error) {
		return newMW(l, opts...)
	})
}

func newDispatch[M any](a *App, build func(*core.Limiter, ...nethttp.Option) (M, error)) (*Dispatch[M], error) {
	a.reload.mu.Lock()
	defer a.reload.mu.Unlock()
	f := func(l *core.Limiter, opts ...nethttp.Option) (any, error) { return build(l, opts...) }
	if !a.reload.build.CompareAndSwap(nil, &f) {
		return nil, errors.New("exampleapp: the App already has a dispatcher (HTTPHandler or NewDispatch): build one per App")
	}
	// The same rules again: every limiter is kept, every middleware built.
	if _, err := a.live.Swap(a.live.Current()); err != nil {
		a.reload.build.Store(nil)
		return nil, fmt.Errorf("exampleapp: %w", err)
	}
	return &Dispatch[M]{a: a}, nil
}

// buildMiddleware is the serve.Server's middleware constructor: the
// dispatcher's adapter's, or nothing before there is one.
func (a *App) buildMiddleware(l *core.Limiter, opts ...nethttp.Option) (any, error) {
	a.Metrics.WatchPolicy(*l.Policy()) // the configured-limit gauges
	if a.OTel != nil {
		a.OTel.WatchPolicy(*l.Policy())
	}
	f := a.reload.build.Load()
	if f == nil {
		return nil, nil
	}
	return (*f)(l, opts...)
}

// Acquire returns the rules snapshot serving now; the caller must Release
// it once, when the request is done.
func (d *Dispatch[M]) Acquire() *rules.Snapshot[any] { return d.a.live.Acquire() }

// Middleware returns the middleware of the rule of snap that a request
// whose framework matched route (empty when unknown) falls under; false
// when no rule matches (the request is not limited). [MetricsPath] has no
// rule.
func (d *Dispatch[M]) Middleware(snap *rules.Snapshot[any], r keyfuncs.Request, route string) (M, bool) {
	h, ok := snap.Handler(d.a.match(snap.Set(), r, route))
	if !ok {
		var zero M
		return zero, false
	}
	m, ok := h.(M)
	return m, ok
}
