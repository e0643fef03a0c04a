package exampleapp

import (
	"net/http"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// Endpoints are the example API's routes that answer with [Reply], in
// net/http pattern form; "GET /" is any other GET path. Besides them the
// examples serve [LoginPattern] (see [Login]).
var Endpoints = []string{"GET /api1", "GET /api2", "POST /api2", "GET /api3", PlansPattern, "GET /"}

// HTTPHandler returns the example API on net/http, limited by the rules
// through the nethttp adapter: the ServeMux of [Endpoints], and in front
// of it the [Dispatch] that routes each request through its rule's
// middleware, in the rules snapshot the request acquired; and the metrics
// at [MetricsPath], not limited. With OpenTelemetry on, each request gets
// a server span (see -otel), on which its rule's decision shows. It is
// the App's dispatcher: call it once.
func (a *App) HTTPHandler() (http.Handler, error) {
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
	mux.Handle("GET "+MetricsPath, a.MetricsHandler())
	d, err := newDispatch(a, func(l *core.Limiter, opts ...nethttp.Option) (http.Handler, error) {
		mw, err := nethttp.NewMiddleware(l, opts...)
		if err != nil {
			return nil, err
		}
		return mw(mux), nil
	})
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Pattern == "" {
			_, r.Pattern = mux.Handler(r)
		}
		if a.tracer != nil {
			ctx, end := a.StartSpan(r.Context(), r.Method, r.Pattern, r.URL.Path, r.Header.Get)
			defer end()
			r = r.WithContext(ctx)
		}
		snap := d.Acquire()
		defer snap.Release()
		if h, ok := d.Middleware(snap, keyfuncs.FromHTTP(r), r.Pattern); ok {
			h.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}), nil
}
