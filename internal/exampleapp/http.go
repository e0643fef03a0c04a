package exampleapp

import (
	"net/http"

	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// Endpoints are the example API's routes, in net/http pattern form; "GET /"
// is any other GET path.
var Endpoints = []string{"GET /api1", "GET /api2", "POST /api2", "GET /api3", "GET /"}

// HTTPHandler returns the example API on net/http, limited by the rules
// through the nethttp adapter: the ServeMux of [Endpoints], and in front
// of it the dispatch that routes each request through its rule's
// middleware; and the metrics at [MetricsPath], not limited.
func (a *App) HTTPHandler() (http.Handler, error) {
	mux := http.NewServeMux()
	for _, ep := range Endpoints {
		mux.HandleFunc(ep, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(Reply(ep, a.Caller(keyfuncs.FromHTTP(r))))
		})
	}
	mux.Handle("GET "+MetricsPath, a.MetricsHandler())
	mws, err := Middlewares(a, nethttp.NewMiddleware)
	if err != nil {
		return nil, err
	}
	limited := make([]http.Handler, len(mws))
	for i, mw := range mws {
		limited[i] = mw(mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Pattern == "" {
			_, r.Pattern = mux.Handler(r)
		}
		if rule := a.Rule(keyfuncs.FromHTTP(r), r.Pattern); rule != nil {
			limited[rule.Index].ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}), nil
}
