package exampleapp

import (
	"net/http"
	"strings"

	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rules/serve"
)

// Endpoints are the example API's routes that answer with [Reply], in
// net/http pattern form; "GET /" is any other GET path. Besides them the
// examples serve [LoginPattern] (see [Login]) and [ExportPattern] (see
// [Export]).
var Endpoints = []string{"GET /api1", "GET /api2", "POST /api2", "GET /api3", PlansPattern, "GET /"}

// HTTPHandler returns the example API on net/http, limited by the rules
// through the nethttp adapter: the ServeMux of [Endpoints] and
// [LoginPattern] behind serve.NewNetHTTP (with [App.ServeConfig]), which
// runs each request through its rule's middleware in the rules snapshot
// the request acquired; the metrics at [MetricsPath] and, with
// -admin-token, the admin surface at serve.AdminPath ([Admin]), neither
// limited.
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
	mux.Handle(ExportPattern, ExportHandler())
	mux.HandleFunc(LoginPattern, func(w http.ResponseWriter, r *http.Request) {
		// the username the login rule counted, never one parsed again
		user, _ := nethttp.Identity(r)
		code, body := Login(user, r.PostFormValue("password"))
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
	// The admin surface takes every method under its path, as the other
	// adapters' examples mount it: a request without the token is 401
	// whatever its method, never the mux's 405 (and never limited).
	admin := Admin(a, srv)
	return srv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if admin != nil && strings.HasPrefix(r.URL.Path, serve.AdminPath) {
			admin.ServeHTTP(w, r)
			return
		}
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

// Admin returns the operators' surface of srv (serve.Server.AdminHandler
// at serve.AdminPath, authorised by serve.BearerToken of -admin-token),
// or nil when no -admin-token was given: then the examples mount
// nothing there. Mount it outside the rules, as /metrics (operators
// spend no quota): GET serve.AdminPath + "login/alice" reads alice's
// failed logins, DELETE forgets them.
func Admin[M any](a *App, srv *serve.Server[M]) http.Handler {
	if a.admin == "" {
		return nil
	}
	h, err := srv.AdminHandler(serve.AdminConfig{Authorize: serve.BearerToken(a.admin)})
	if err != nil { // a fixed, valid configuration: a bug here, at start-up
		panic(err)
	}
	return h
}
