package nethttp

import (
	"net/http"
	"reflect"
	"strings"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// denyHandler is what [WithDenyHandler] takes.
type denyHandler = func(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection)

// WithDenyHandler replaces the whole denial (status, body) with h, which
// writes a denial in place of the default one: the rate-limit headers
// (and Retry-After) are already set on w.Header(); h writes the status
// and body. It must not panic and should not echo internal details: rej
// carries no store error text. It applies to quota, no-key and
// store-unavailable denials alike (rej.Reason tells them apart). h must
// not be nil. Only this package's middleware accepts it: another adapter
// given it fails at construction, naming both packages.
func WithDenyHandler(h func(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection)) httplimit.Option {
	return httplimit.AdapterOption("nethttp", "WithDenyHandler", h)
}

// adapter is this package to the engine: an HTTP adapter that reads its
// WithDenyHandler and WithRoute and reports outcomes.
var adapter = httplimit.Adapter{
	Name: "nethttp",
	Options: map[string]reflect.Type{
		"WithDenyHandler": reflect.TypeFor[denyHandler](),
		"WithRoute":       reflect.TypeFor[func(*http.Request) string](),
	},
	Outcome: true,
}

// NewMiddleware returns the rate-limiting middleware applying l (and any
// [httplimit.WithCheck] limiters) to every request, or a configuration error naming
// the option to fix.
//
// Use it around a whole mux for a global limit, or around one handler for
// a per-route limit:
//
//	mux.Handle("POST /login", loginLimit(http.HandlerFunc(login)))
//	http.ListenAndServe(addr, global(mux))
//
// Route patterns: when the wrapped handler is an *http.ServeMux (a global
// middleware) and the request has no Pattern yet, the middleware asks the
// mux which pattern will serve the request (ServeMux.Handler) and sets
// r.Pattern to it, as the mux itself would; inside a mux, r.Pattern is
// already set. When that pattern has no wildcards, the middleware then
// calls the handler the mux named itself rather than the mux, which would
// only look the route up again (it answers the same: see direct). Other routers (chi, gorilla) decide routes after their
// middleware runs: there the route is unknown ("" scope, one quota per
// client across the routes) unless [WithRoute] asks the router for it
// (chi: Mux.Find; see _examples/chi), [httplimit.WithScopeFunc] or [httplimit.WithScope]
// says otherwise, or the middleware is attached per route.
//
// The middleware is safe for concurrent use and never panics on a
// request.
func NewMiddleware(l *core.Limiter, opts ...httplimit.Option) (func(http.Handler) http.Handler, error) {
	e, err := httplimit.NewAdapterEngine(adapter, l, opts...)
	if err != nil {
		return nil, err
	}
	deny, err := httplimit.AdapterOptionValue[denyHandler](e, "WithDenyHandler")
	if err != nil {
		return nil, err
	}
	route, err := httplimit.AdapterOptionValue[func(*http.Request) string](e, "WithRoute")
	if err != nil {
		return nil, err
	}
	parts, routeParts := e.PartsKeyed()
	return func(next http.Handler) http.Handler {
		if next == nil {
			next = http.NotFoundHandler()
		}
		mux, _ := next.(*http.ServeMux)
		h := &handler{e: e, next: next, mux: mux, deny: deny, route: route, parts: parts && route == nil, routeParts: routeParts}
		if e.InFlight() != nil {
			return &counted{h: h, f: e.InFlight()}
		}
		return h
	}, nil
}

// counted is the handler with WithInFlight: the request is counted from
// before the decision until next has returned.
type counted struct {
	h *handler
	f *core.InFlight
}

func (c *counted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.f.Enter()
	defer c.f.Exit()
	c.h.ServeHTTP(w, r)
}

// New is [NewMiddleware] that panics on a configuration error, for
// start-up code: r.Use(nethttp.New(limiter)).
func New(l *core.Limiter, opts ...httplimit.Option) func(http.Handler) http.Handler {
	mw, err := NewMiddleware(l, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

type handler struct {
	e     *httplimit.Engine
	next  http.Handler
	mux   *http.ServeMux
	deny  denyHandler
	route func(*http.Request) string // WithRoute, or nil
	// parts: decide by KeyParts (see decide); routeParts: with the route
	parts, routeParts bool
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	next := h.next
	if h.mux != nil && r.Pattern == "" {
		var mh http.Handler
		mh, r.Pattern = h.mux.Handler(r)
		if direct(r) {
			next = mh
		}
	}
	var res httplimit.Result
	h.decide(r, &res)
	if res.Action == httplimit.Skip {
		next.ServeHTTP(w, r)
		return
	}
	h.e.SetHTTP(&res, w.Header())
	if res.Action == httplimit.Pass {
		if id, ok := res.Identity(); ok { // for Identity, in the handler
			r = r.WithContext(httplimit.ContextWithIdentity(r.Context(), id))
		}
		if h.e.CountsOutcome() {
			serveCounted(h.e, &res, next, w, r)
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	rej := h.e.Reject(&res)
	if h.deny != nil {
		h.deny(w, r, rej)
		return
	}
	WriteRejection(w, rej)
}

// decide decides r: by its KeyParts, the peer and the ServeMux pattern
// (what the engine reads from net/http's view), when the engine's keys are
// a function of them; with WithRoute before the mux has routed r, through
// a view giving the route WithRoute resolves; else through net/http's view.
func (h *handler) decide(r *http.Request, res *httplimit.Result) {
	switch {
	case h.parts:
		p := httplimit.KeyParts{Peer: r.RemoteAddr, StableRoute: true}
		if h.routeParts {
			p.Route = r.Pattern
		}
		h.e.Decide(r.Context(), request{r}, &p, res)
	case h.route != nil && r.Pattern == "":
		h.e.Decide(r.Context(), routedRequest{request{r}, h.route(r)}, nil, res)
	default:
		h.e.Decide(r.Context(), request{r}, nil, res)
	}
}

// direct reports whether the handler the mux gave for r (whose Pattern
// the mux just set) can be called in place of the mux, saving the mux's
// second route lookup: when the pattern has no wildcard. ServeMux.ServeHTTP
// would find the same handler and set, besides r.Pattern, only the
// request's wildcard matches, of which such a pattern has none (PathValue
// answers alike; the 404, 405 and redirect handlers take no matches
// either). A pattern with wildcards ("/users/{id}", "/{$}") goes through
// the mux, which sets them; so does an "OPTIONS *" request, which the mux
// answers itself.
func direct(r *http.Request) bool {
	return r.RequestURI != "*" && strings.IndexByte(r.Pattern, '{') < 0
}

// WriteRejection writes rej's default denial (status, Content-Type, body)
// to w; for a deny handler ([WithDenyHandler]) that only wants to add something.
func WriteRejection(w http.ResponseWriter, rej httplimit.Rejection) {
	if rej.ContentType != "" {
		w.Header()["Content-Type"] = []string{rej.ContentType}
	}
	w.WriteHeader(rej.Status)
	_, _ = w.Write(rej.Body)
}
