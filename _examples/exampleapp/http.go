package exampleapp

import (
	"net/http"

	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules/serve"
)

// Endpoints are the example API's routes that answer with [Reply], in
// net/http pattern form; "GET /" is any other GET path. Besides them the
// examples serve [LoginPattern] (see [Login]).
var Endpoints = []string{"GET /api1", "GET /api2", "POST /api2", "GET /api3", PlansPattern, "GET /"}

// HTTPHandler returns the example API on net/http, limited by the rules
// through the nethttp adapter: the ServeMux of [Endpoints] and
// [LoginPattern] behind serve.NewNetHTTP (with [App.ServeConfig]), which
// runs each request through its rule's middleware in the rules snapshot
// the request acquired; and the metrics at [MetricsPath], not limited.
// With OpenTelemetry on, each request gets a server span (see -otel), on
// which its rule's decision shows. Reload the rules into the returned
// Server ([App.StartReloads]).
func (a *App) HTTPHandler() (*serve.Server[http.Handler], http.Handler, error) {
	mux := http.NewServeMux()
	for _, ep := range Endpoints {
		mux.HandleFunc(ep, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(Reply(ep, a.Caller(keyfuncs.FromHTTP(r))))
		})
	}
	mux.HandleFunc(LoginPattern, func(w http.ResponseWriter, r *http.Request) {
		code, body := Login(r.PostFormValue("username"), r.PostFormValue("password"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(body)
	})
	metrics := "GET " + MetricsPath
	mux.Handle(metrics, a.MetricsHandler())
	srv, limited, err := serve.NewNetHTTP(a.ServeConfig(), a.Rules, mux)
	if err != nil {
		return nil, nil, err
	}
	return srv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Pattern == "" {
			_, r.Pattern = mux.Handler(r)
		}
		if r.Pattern == metrics { // the scraper is never limited
			mux.ServeHTTP(w, r)
			return
		}
		if a.tracer != nil {
			ctx, end := a.StartSpan(r.Context(), r.Method, r.Pattern, r.Header.Get)
			defer end()
			r = r.WithContext(ctx)
		}
		limited.ServeHTTP(w, r)
	}), nil
}
