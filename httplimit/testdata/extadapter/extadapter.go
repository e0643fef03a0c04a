// Package extadapter is a rate-limiting middleware for net/http written
// outside limitkit's module with only its public API: an adapter is a
// translation of a framework's request and response around an
// httplimit.Engine. httplimit's TestExternalAdapter builds and tests this
// module against the checkout it runs in.
package extadapter

import (
	"net/http"
	"reflect"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// name is this adapter's name: it prefixes errors, and tags the options
// only this adapter accepts.
const name = "extadapter"

// adapter tells the engine what this adapter honours: the adapter option
// it reads (WithDenyHandler, a DenyHandler), HTTP responses (so
// WithDenyStatus and WithDenyBody apply), and no counting by outcome — it
// never calls Engine.Outcome, so httplimit.WithOutcome is refused at
// construction instead of counting nothing.
var adapter = httplimit.Adapter{
	Name:    name,
	Options: map[string]reflect.Type{"WithDenyHandler": reflect.TypeFor[DenyHandler]()},
}

// DenyHandler writes a denial in place of the default one.
type DenyHandler func(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection)

// WithDenyHandler replaces the default denial with h; another adapter
// given it fails at construction.
func WithDenyHandler(h DenyHandler) httplimit.Option {
	return httplimit.AdapterOption(name, "WithDenyHandler", h)
}

// New returns the middleware applying l with opts (any httplimit option),
// or the configuration error.
func New(l *core.Limiter, opts ...httplimit.Option) (func(http.Handler) http.Handler, error) {
	e, err := httplimit.NewAdapterEngine(adapter, l, opts...)
	if err != nil {
		return nil, err
	}
	deny, err := httplimit.AdapterOptionValue[DenyHandler](e, "WithDenyHandler")
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f := e.InFlight(); f != nil {
				f.Enter()
				defer f.Exit()
			}
			var res httplimit.Result
			e.Decide(r.Context(), view{r}, nil, &res)
			if res.Action == httplimit.Skip {
				next.ServeHTTP(w, r)
				return
			}
			var f httplimit.Fields
			e.Fields(&res, &f)
			for i := 0; i < f.Len(); i++ {
				name, dyn, static := f.At(i)
				if dyn != nil {
					static = string(dyn)
				}
				w.Header().Set(name, static)
			}
			if res.Action == httplimit.Pass {
				next.ServeHTTP(w, r)
				return
			}
			rej := e.Reject(&res)
			if deny != nil {
				deny(w, r, rej)
				return
			}
			w.Header().Set("Content-Type", rej.ContentType)
			w.WriteHeader(rej.Status)
			_, _ = w.Write(rej.Body)
		})
	}, nil
}

// view is the request as the engine reads it. Its route is the value of
// the X-Route header, standing for a router's matched pattern.
type view struct{ r *http.Request }

var _ httplimit.Request = view{}

func (v view) Method() string                    { return v.r.Method }
func (v view) Route() string                     { return v.r.Header.Get("X-Route") }
func (v view) Path() string                      { return v.r.URL.Path }
func (v view) Header(name string) string         { return v.r.Header.Get(name) }
func (v view) HeaderValues(name string) []string { return v.r.Header.Values(name) }
func (v view) Query(name string) string          { return v.r.URL.Query().Get(name) }
func (v view) RemoteAddr() string                { return v.r.RemoteAddr }
func (v view) Value(key any) any                 { return v.r.Context().Value(key) }

// AnyMethod is part of the engine's contract: whether the matched route
// accepts every method (its scope is then the route alone). This stand-in
// router registers each route under one method.
func (v view) AnyMethod() bool { return false }
