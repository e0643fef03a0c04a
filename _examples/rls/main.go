// Command rls runs Envoy's rate limit service beside a Go HTTP service,
// both limiting by one quota: what Envoy asks limitkit-rls about (the
// descriptor (api_key, <key>)) and what the Go service's middleware
// checks (the X-Api-Key header) is one counter.
//
//	go run ./_examples/rls                          # embedded store, shared in-process
//	go run ./_examples/rls -redis 127.0.0.1:6379    # through Redis: each side its own client
//
//	curl -i -H 'X-Api-Key: abc' localhost:8080/hello                # the Go service
//	grpcurl -plaintext -d '{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"abc"}]}]}' \
//	  localhost:8081 envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
//
// With the default configuration (10 a minute per API key) ten requests in
// a minute are admitted in all, however they are split between the two.
//
// Flags: -grpc (the rate limit service, default :8081, with grpc.health.v1
// and reflection), -http (the Go service, default :8080), -redis
// (host:port or a redis:// URL; empty: the embedded store), -config (an
// envoyproxy/ratelimit configuration file; default: the one below).
//
// What makes the two share a counter is rls.Config.Match: the Go side's
// limiter is built from the rule's policy, and its middleware's key
// function returns Match's key with httplimit.WithScope("") (docs/envoy.md,
// "Sharing a quota with a Go service").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rls"
)

// defaultConfig is the configuration without -config: the file an Envoy
// route with a request_headers action (x-api-key -> api_key) is served by.
const defaultConfig = `
domain: edge
descriptors:
  - key: api_key
    rate_limit:
      unit: minute
      requests_per_unit: 10
`

// The descriptor the Go service shares with Envoy.
const (
	domain    = "edge"
	descKey   = "api_key"
	apiHeader = "X-Api-Key"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil && !errors.Is(err, flag.ErrHelp) {
		log.Fatal(err)
	}
}

// run serves until ctx is done; ready, when not nil, gets the bound
// addresses once both servers accept connections.
func run(ctx context.Context, args []string, out io.Writer, ready func(grpcAddr, httpAddr string)) error {
	fs := flag.NewFlagSet("rls", flag.ContinueOnError)
	grpcAddr := fs.String("grpc", ":8081", "the rate limit service's gRPC address")
	httpAddr := fs.String("http", ":8080", "the Go service's HTTP address")
	redisURL := fs.String("redis", "", "Redis: host:port or redis:// URL; empty: the embedded store, shared in-process")
	cfgPath := fs.String("config", "", "an envoyproxy/ratelimit configuration file (default: 10 a minute per api_key in domain edge)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg *rls.Config
	var err error
	if *cfgPath == "" {
		cfg, err = rls.ParseConfig(map[string][]byte{"edge.yaml": []byte(defaultConfig)})
	} else {
		cfg, err = rls.LoadConfig(*cfgPath)
	}
	if err != nil {
		return err
	}
	policy, _, ok := cfg.Match(domain, descKey, "any")
	if !ok {
		return fmt.Errorf("the configuration has no limit for the descriptor (%s, <key>) in domain %s", descKey, domain)
	}

	// One store for both sides, or, with Redis, one each: two processes
	// on one Redis would share the quota the same way.
	rlsStore, httpStore, closeStores, err := openStores(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer closeStores()

	srv, err := rls.New(rlsStore, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	lim, err := core.NewLimiter(httpStore, policy)
	if err != nil {
		return err
	}
	defer lim.Release()
	byAPIKey := func(r keyfuncs.Request) (string, error) {
		v := strings.TrimSpace(r.Header(apiHeader))
		if v == "" {
			return "", keyfuncs.ErrNoKey
		}
		_, key, ok := cfg.Match(domain, descKey, v)
		if !ok {
			return "", keyfuncs.ErrNoKey
		}
		return key, nil
	}
	mw, err := nethttp.NewMiddleware(lim, httplimit.WithScope(""), httplimit.WithKey(byAPIKey), httplimit.WithNoKeyDeny())
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s\n", r.Header.Get(apiHeader))
	})

	gln, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		return fmt.Errorf("-grpc %s: %w", *grpcAddr, err)
	}
	hln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		gln.Close()
		return fmt.Errorf("-http %s: %w", *httpAddr, err)
	}
	gs := grpc.NewServer()
	pb.RegisterRateLimitServiceServer(gs, srv)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	reflection.Register(gs)
	go gs.Serve(gln)
	defer gs.Stop()
	hs := &http.Server{Handler: mw(mux), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(hln)
	defer hs.Close()

	store := "embedded store (shared in-process)"
	if *redisURL != "" {
		store = "redis " + *redisURL + " (a client each)"
	}
	fmt.Fprintf(out, "rate limit service on %s, Go service on %s, %s; policy %s (%s)\n",
		gln.Addr(), hln.Addr(), store, policy.Name, policy.StateString())
	if ready != nil {
		ready(gln.Addr().String(), hln.Addr().String())
	}
	<-ctx.Done()
	return nil
}

func openStores(ctx context.Context, url string) (rlsStore, httpStore core.Store, closeAll func(), err error) {
	if url == "" {
		st, err := memstore.New()
		if err != nil {
			return nil, nil, nil, err
		}
		return st, st, func() { st.Close() }, nil
	}
	if !strings.Contains(url, "://") {
		url = "redis://" + url
	}
	var closers []func()
	closeAll = func() {
		for _, c := range closers {
			c()
		}
	}
	open := func() (core.Store, error) {
		c, err := redisstore.NewClient(url)
		if err != nil {
			return nil, fmt.Errorf("-redis: %w", err)
		}
		closers = append(closers, func() { c.Close() })
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := c.Ping(pctx).Err(); err != nil {
			return nil, fmt.Errorf("-redis: Redis does not answer: %w", err)
		}
		return redisstore.New(c)
	}
	if rlsStore, err = open(); err == nil {
		httpStore, err = open()
	}
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return rlsStore, httpStore, closeAll, nil
}
