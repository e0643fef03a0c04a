// Command grpc serves a small echo service over gRPC, limited by a rules
// file through the grpclimit interceptors: the methods
// /limitkit.example.Echo/Say (echoes) and /limitkit.example.Echo/Shout
// (echoes in capitals) take and return a google.protobuf.StringValue, so
// any grpc-go client can call them with conn.Invoke and the well-known
// wrapper types, without generated code; /limitkit.example.Echo/Chat is a
// bidirectional stream of them (cc.NewStream), limited when it opens.
//
//	go run ./_examples/grpc -addr :50051
//
// The default rules (rules.yaml, embedded) limit Say to 10 calls per
// minute per API key (metadata x-api-key; with a valid JWT in
// "authorization: Bearer ...", its subject) and 5 per minute per peer IP
// for calls that carry neither; the other methods of the service
// (/limitkit.example.Echo/*: Shout calls, Chat streams) to 20 and 10.
// Each method has its own quota per caller. A denial is RESOURCE_EXHAUSTED with RetryInfo, QuotaFailure
// and ErrorInfo details and the grpc-retry-pushback-ms trailer; every
// limited call carries x-ratelimit-limit, -remaining and -reset metadata.
// The health checking and reflection services are never limited when a
// server registers them (matched exactly; this one registers neither).
//
// The flags are the HTTP examples', with the same meaning: -addr; -rules,
// a rules file whose routes are full method names (/pkg.Service/Method,
// /pkg.Service/*; a rule lists no methods, every call being an HTTP/2
// POST), reloaded on SIGHUP and, with -watch, on change; -redis
// host:port or redis:// / rediss:// URL (empty: an in-process store;
// instances on one Redis share the quotas), behind the fleet tier, whose
// write-back sync interval is -sync (0: exact, every decision at Redis)
// and -fleet-size, -allow-degraded; -jwt-secret (or LIMITKIT_JWT_SECRET;
// none: a random one, and a sample token is logged); -trusted-proxies,
// CIDRs whose x-forwarded-for metadata names the client (default none: the
// peer address is the client). LIMITKIT_API_KEYS, when set, lists the
// valid x-api-key values as over HTTP; unset, every x-api-key is a key
// of its own.
//
// -metrics-addr, this program's own flag, serves the Prometheus metrics
// over HTTP at /metrics on a second address (the HTTP examples' metrics:
// limitkit_decisions_total by rule and outcome, the configured limits,
// ...); empty, the default, serves none:
//
//	go run ./_examples/grpc -metrics-addr :9090 &
//	curl -s localhost:9090/metrics | grep limitkit_decisions_total
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/grpclimit"
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
	s, err := start(args)
	if err != nil {
		return err
	}
	defer s.app.Close()
	defer s.app.StartReloads(s.rules.Live())() // SIGHUP reloads -rules; -watch also on change
	if s.app.StoreErr != nil {
		log.Printf("WARNING: started degraded (-allow-degraded): %v; each rule's fail mode decides until the store answers", s.app.StoreErr)
	}
	if s.metrics != nil {
		go func() { _ = s.metrics.Serve(s.metricsLn) }()
		defer s.metrics.Close()
	}
	if s.app.SampleToken != "" {
		log.Printf("no -jwt-secret: generated one; a token for user alice (metadata authorization: Bearer <token>):\n%s", s.app.SampleToken)
	}
	log.Printf("grpc example listening on %s; store: %s; rules: %s (%d rules); fail modes: %s",
		s.ln.Addr(), s.app.StoreInfo, s.app.RulesInfo, len(s.app.Rules.Rules()), s.app.FailModes())
	if s.metrics != nil {
		log.Printf("metrics: http://%s%s", s.metricsLn.Addr(), exampleapp.MetricsPath)
	}
	return s.srv.Serve(s.ln)
}

// server is the example wired and listening, not yet serving.
type server struct {
	app   *exampleapp.App
	rules *serve.Server[rule] // the rules served: an interceptor pair each
	srv   *grpc.Server
	ln    net.Listener
	// the metrics over HTTP with -metrics-addr; nil without
	metrics   *http.Server
	metricsLn net.Listener
}

// start parses the flags, builds the app (store, rules, a limiter and an
// interceptor per rule) and the gRPC server, and binds -addr (and
// -metrics-addr). opts are for tests (a clock).
func start(args []string, opts ...exampleapp.Option) (*server, error) {
	metricsAddr, _, args := exampleapp.CutFlag(args, "metrics-addr")
	cfg, err := exampleapp.ParseFlagsAddr("grpc", ":50051", args, nil)
	if err != nil {
		return nil, err
	}
	def, err := rules.Parse(defaultRules)
	if err != nil {
		return nil, err
	}
	opts = append([]exampleapp.Option{
		exampleapp.WithDefaultRules(def, "embedded gRPC rules (_examples/grpc/rules.yaml)"),
		exampleapp.WithAnyAPIKey(),
	}, opts...)
	app, err := exampleapp.New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	// One rule's interceptors per rule (package rules/serve), rebuilt when
	// the rules reload.
	rs, err := serve.New(app.ServeConfig(), app.Rules, newRule)
	if err != nil {
		app.Close()
		return nil, err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(unary(rs)), grpc.StreamInterceptor(stream(rs)))
	srv.RegisterService(&echoService, struct{}{})
	s := &server{app: app, rules: rs, srv: srv}
	if metricsAddr != "" {
		if s.metricsLn, err = net.Listen("tcp", metricsAddr); err != nil {
			app.Close()
			return nil, fmt.Errorf("-metrics-addr %s: %w", metricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET "+exampleapp.MetricsPath, app.MetricsHandler())
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}
	if s.ln, err = exampleapp.Listen(cfg.Addr); err != nil {
		if s.metricsLn != nil {
			s.metricsLn.Close()
		}
		app.Close()
		return nil, err
	}
	return s, nil
}

// rule is one rule's interceptors.
type rule struct {
	unary  grpc.UnaryServerInterceptor
	stream grpc.StreamServerInterceptor
}

// newRule builds a rule's interceptors with the options exampleapp gives
// every adapter (the rule's key, the IP fallback), but grpclimit's scope:
// each method its own quota per caller, a wildcard rule's methods too
// (over HTTP a rule's routes share the rule's quota).
func newRule(l *core.Limiter, opts ...httplimit.Option) (rule, error) {
	opts = append(opts, httplimit.WithScopeFunc(func(r keyfuncs.Request) string { return r.Route() }),
		httplimit.WithErrorHook(func(_ context.Context, err error) { log.Print(err) }))
	ic, err := grpclimit.New(l, opts...)
	if err != nil {
		return rule{}, err
	}
	return rule{ic.UnaryServerInterceptor(), ic.StreamServerInterceptor()}, nil
}

// unary hands each call to its rule's interceptor, in the rules snapshot
// serving when it arrived; a call no rule matches is not limited.
func unary(rs *serve.Server[rule]) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		snap := rs.Live().Acquire()
		defer snap.Release()
		if r, ok := rs.Middleware(snap, grpclimit.NewRequest(ctx, info.FullMethod), info.FullMethod); ok {
			return r.unary(ctx, req, info, handler)
		}
		return handler(ctx, req)
	}
}

// stream is unary's counterpart for streams, decided when they open.
func stream(rs *serve.Server[rule]) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		snap := rs.Live().Acquire()
		defer snap.Release()
		if r, ok := rs.Middleware(snap, grpclimit.NewRequest(ss.Context(), info.FullMethod), info.FullMethod); ok {
			return r.stream(srv, ss, info, handler)
		}
		return handler(srv, ss)
	}
}

// echoService is /limitkit.example.Echo/Say and /Shout, registered by
// hand.
var echoService = grpc.ServiceDesc{
	ServiceName: "limitkit.example.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		method("Say", func(s string) string { return s }),
		method("Shout", strings.ToUpper),
	},
	Streams: []grpc.StreamDesc{{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: chat}},
}

// chat is /limitkit.example.Echo/Chat, a bidirectional stream that
// echoes each StringValue until the client closes its side.
func chat(_ any, ss grpc.ServerStream) error {
	for {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := ss.SendMsg(in); err != nil {
			return err
		}
	}
}

func method(name string, f func(string) string) grpc.MethodDesc {
	full := "/limitkit.example.Echo/" + name
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(_ context.Context, req any) (any, error) {
			return wrapperspb.String(f(req.(*wrapperspb.StringValue).GetValue())), nil
		}
		if ic == nil {
			return h(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
	}}
}
