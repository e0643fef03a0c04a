// Command connect serves the gRPC example's echo service with Connect
// (connectrpc.com/connect) instead of grpc-go, limited by a rules file
// through the connectlimit interceptor: /limitkit.example.Echo/Say
// (echoes) and /limitkit.example.Echo/Shout (echoes in capitals) take
// and return a google.protobuf.StringValue, over the Connect, gRPC and
// gRPC-Web protocols, on HTTP/1.1 and HTTP/2 without TLS (h2c): a grpc-go
// client (conn.Invoke), a Connect client or curl can call them:
//
//	go run ./_examples/connect -addr :8080
//	curl -s -H 'Content-Type: application/json' -d '"hi"' localhost:8080/limitkit.example.Echo/Say
//
// The default rules (rules.yaml, embedded: _examples/grpc's) limit Say to
// 10 calls per minute per API key (header x-api-key; with a valid JWT
// in "Authorization: Bearer ...", its subject) and 5 per minute per peer
// IP for calls that carry neither; Shout to 20 and 10. Each procedure
// has its own quota per caller. A denial is resource_exhausted (HTTP 429
// for the Connect protocol) with the RetryInfo detail and Retry-After;
// every limited call carries the X-RateLimit-* headers.
//
// The flags are the HTTP examples' (-addr, -rules, -redis, -sync,
// -fleet-size, -allow-degraded, -jwt-secret, -trusted-proxies, -watch,
// -admin-token), with the same meaning; metrics are at /metrics on the
// same address, and with -admin-token the admin surface at
// /limitkit/admin/.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/connectlimit"
	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

//go:embed rules.yaml
var defaultRules []byte

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		log.Fatal(err) // after run's deferred calls: the store is closed
	}
}

func run(args []string) error {
	cfg, err := exampleapp.ParseFlagsAddr("connect", ":8080", args, nil)
	if err != nil {
		return err
	}
	def, err := rules.Parse(defaultRules)
	if err != nil {
		return err
	}
	app, err := exampleapp.New(cfg,
		exampleapp.WithDefaultRules(def, "embedded Connect rules (_examples/connect/rules.yaml)"),
		exampleapp.WithAnyAPIKey())
	if err != nil {
		return err
	}
	defer app.Close()
	// One interceptor per rule (package rules/serve), rebuilt when the
	// rules reload.
	rs, err := serve.New(app.ServeConfig(), app.Rules, newRule)
	if err != nil {
		return err
	}
	defer app.StartReloads(rs.Live())() // SIGHUP reloads -rules; -watch also on change
	ln, err := exampleapp.Listen(cfg.Addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: newMux(app, rs), ReadHeaderTimeout: 5 * time.Second}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true) // h2c: gRPC clients without TLS
	app.LogStartup("connect", ln)
	return hs.Serve(ln)
}

// newRule builds a rule's interceptor with the options exampleapp gives
// every adapter (the rule's key, the IP fallback), but each procedure
// its own quota per caller, a wildcard rule's procedures too.
func newRule(l *core.Limiter, opts ...httplimit.Option) (*connectlimit.Interceptor, error) {
	opts = append(opts, httplimit.WithScopeFunc(func(r keyfuncs.Request) string { return r.Route() }),
		httplimit.WithErrorHook(func(_ context.Context, err error) { log.Print(err) }))
	return connectlimit.New(l, opts...)
}

// byRule hands each call to its rule's interceptor, in the rules
// snapshot serving when it arrived; a call no rule matches is not
// limited.
type byRule struct {
	rs *serve.Server[*connectlimit.Interceptor]
}

func (b byRule) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		snap := b.rs.Live().Acquire()
		defer snap.Release()
		proc := req.Spec().Procedure
		v := keyfuncs.FromHTTP(&http.Request{Method: http.MethodPost, Header: req.Header(), RemoteAddr: req.Peer().Addr, Pattern: proc})
		if ic, ok := b.rs.Middleware(snap, v, proc); ok {
			return ic.WrapUnary(next)(ctx, req)
		}
		return next(ctx, req)
	}
}

func (b byRule) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (b byRule) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next // the service has no streams
}

// newMux serves the echo service, each call limited by its rule of rs,
// and /metrics (and the admin surface) unlimited.
func newMux(app *exampleapp.App, rs *serve.Server[*connectlimit.Interceptor]) *http.ServeMux {
	mux := http.NewServeMux()
	opt := connect.WithInterceptors(byRule{rs})
	for name, f := range map[string]func(string) string{
		"Say":   func(s string) string { return s },
		"Shout": strings.ToUpper,
	} {
		proc := "/limitkit.example.Echo/" + name
		mux.Handle(proc, connect.NewUnaryHandler(proc, func(_ context.Context, r *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
			return connect.NewResponse(wrapperspb.String(f(r.Msg.GetValue()))), nil
		}, opt))
	}
	mux.Handle("GET "+exampleapp.MetricsPath, app.MetricsHandler())
	if admin := exampleapp.Admin(app, rs); admin != nil { // -admin-token
		mux.Handle(serve.AdminPath, admin)
	}
	return mux
}
