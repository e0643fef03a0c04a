// Package app is limitkit-rls's wiring: flags, store, gRPC and metrics
// servers, and configuration reload. It is internal to the command; users
// mounting the service in their own gRPC server use package rls.
package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/metrics"
	"github.com/limitkit/limitkit/rls"
)

// Config is the command line.
type Config struct {
	Addr, ConfigPath, Redis, MetricsAddr, OTel string
	Sync, Watch, StoreTimeout                  time.Duration
	Headers, AllowDegraded, Pipeline           bool
}

// ParseFlags reads args.
func ParseFlags(args []string, out io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("limitkit-rls", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Addr, "addr", ":8081", "gRPC listen address")
	fs.StringVar(&c.ConfigPath, "config", "", "envoyproxy/ratelimit configuration: a YAML file or a directory of them (required)")
	fs.StringVar(&c.Redis, "redis", "", "Redis: host:port, redis://[user:password@]host:port[/db], rediss:// (TLS), redis://h1:p1,h2:p2 (a Cluster) or redis://s:26379?master_name=m (Sentinel); empty: the embedded store")
	fs.DurationVar(&c.Sync, "sync", 0, "with -redis: the fleet tier's write-back sync interval (e.g. 100ms); 0 = exact")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics and /healthz address; empty: off")
	fs.BoolVar(&c.Headers, "headers", true, "add X-Ratelimit-Limit, -Remaining, -Reset and Retry-After to the responses")
	fs.DurationVar(&c.Watch, "watch", time.Second, "check the configuration for changes this often; 0: reload only on SIGHUP")
	fs.DurationVar(&c.StoreTimeout, "store-timeout", core.DefaultTimeout, "deadline of one store call; past it a rule's fail mode decides (open by default: admitted)")
	fs.BoolVar(&c.Pipeline, "redis-pipeline", true, "with -redis: send the decisions waiting for one Redis node in one pipeline, with no window (redisstore.WithPipelining); -redis-pipeline=false: one round trip per decision")
	fs.StringVar(&c.OTel, "otel", "", "also export the metrics to OpenTelemetry: stdout (JSON lines every 10s) or otlp (OTLP/gRPC, set up by the OTEL_EXPORTER_OTLP_* environment); empty: off")
	fs.BoolVar(&c.AllowDegraded, "allow-degraded", false, "start even when Redis does not answer (decisions follow each rule's fail mode meanwhile)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.ConfigPath == "" {
		return c, errors.New("-config is required: a file or directory in envoyproxy/ratelimit's format")
	}
	if c.Sync < 0 || c.Sync > time.Hour { // the fleet tier's bound (core.Policy.Sync)
		return c, fmt.Errorf("-sync %v: want 0 (exact) up to %v", c.Sync, time.Hour)
	}
	if c.Sync > 0 && c.Redis == "" {
		return c, errors.New("-sync needs -redis (the embedded store is exact and local)")
	}
	if c.StoreTimeout <= 0 {
		return c, fmt.Errorf("-store-timeout %v: want > 0", c.StoreTimeout)
	}
	if c.OTel != "" && c.OTel != otelStdout && c.OTel != otelOTLP {
		return c, fmt.Errorf("-otel %q: want %s, %s or nothing", c.OTel, otelStdout, otelOTLP)
	}
	if c.Watch < 0 {
		return c, fmt.Errorf("-watch %v: want >= 0", c.Watch)
	}
	return c, nil
}

// GCPercent is the garbage collector's target (GOGC) that [TuneGC] sets
// when the environment sets none. An RLS allocates a few kilobytes per
// decision and keeps little: at Go's default of 100 it collects so often
// that the collector, and the regrowth of the stacks it shrinks, take a
// fifth to a third of the server's CPU under load (docs/envoy.md has the
// figures). 400 lets the heap grow to five times what is live (the fleet
// tier's table included) before a collection: under the side-by-side load
// the server's peak RSS rose from 31-33 to 43-46 MiB.
const GCPercent = 400

// TuneGC sets the collector's target to GCPercent unless getenv("GOGC")
// names one (GOGC=100 restores Go's default, trading CPU for memory). It
// returns the target in force.
func TuneGC(getenv func(string) string) int {
	if v := getenv("GOGC"); v != "" {
		p := debug.SetGCPercent(-1) // read the runtime's (GOGC's) target
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}

// Ready reports the bound addresses once the servers accept connections.
type Ready func(grpcAddr, metricsAddr string)

// Run serves until ctx is done. hup delivers SIGHUP (nil: none).
func Run(ctx context.Context, args []string, hup <-chan os.Signal, log *slog.Logger, ready Ready) error {
	c, err := ParseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	// The fingerprint is taken before the load it stands for: a file
	// written after it (even before the server is ready) is a change the
	// watcher sees; taken after, such a write would be the baseline, and
	// its content never loaded.
	last := fingerprint(c.ConfigPath)
	cfg, err := rls.LoadConfig(c.ConfigPath)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.MustNew()
	reg.MustRegister(m)
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "limitkit", Subsystem: "rls", Name: "config_loads_total",
		Help: "Configuration loads by result (ok, error)."}, []string{"result"})
	reg.MustRegister(reloads)
	near := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "limitkit", Subsystem: "rls", Name: "near_limit_total",
		Help: "Hits admitted above 80% of a rule's limit (envoyproxy/ratelimit's near_limit at NEAR_LIMIT_RATIO 0.8), by policy (rls: and the rule's full key)."}, []string{"policy"})
	reg.MustRegister(near)

	ot, stopOTel, err := setupOTel(ctx, c.OTel, os.Stdout)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopOTel(); err != nil {
			log.Warn("OpenTelemetry: the last export failed", "err", err)
		}
	}()
	obs := fanOut(m, ot)

	store, info, closeStore, err := openStore(ctx, c, m, obs)
	if err != nil {
		return err
	}
	defer closeStore()
	nearHits := func(policy string, hits uint64) { near.WithLabelValues(policy).Add(float64(hits)) }
	srv, err := rls.New(store, cfg, rls.WithHeaders(c.Headers), rls.WithNearLimit(nearHits), rls.WithLimiterOptions(core.WithObserver(obs), core.WithLogger(log), core.WithTimeout(c.StoreTimeout)))
	if err != nil {
		return err
	}
	defer srv.Close()
	reloads.WithLabelValues("ok").Inc()

	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w; pick another address with -addr", c.Addr, err)
	}
	gs := grpc.NewServer(serverOptions()...)
	pb.RegisterRateLimitServiceServer(gs, srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	go gs.Serve(ln)
	defer gs.Stop()

	metricsAddr := ""
	if c.MetricsAddr != "" {
		mln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			return fmt.Errorf("-metrics-addr %s: %w; pick another address, or -metrics-addr '' to turn it off", c.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
		hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go hsrv.Serve(mln)
		defer hsrv.Close()
		metricsAddr = mln.Addr().String()
	}
	log.Info("limitkit-rls serving", "grpc", ln.Addr().String(), "metrics", metricsAddr, "store", info, "config", c.ConfigPath)
	if ready != nil {
		ready(ln.Addr().String(), metricsAddr)
	}

	var tick <-chan time.Time
	if c.Watch > 0 {
		t := time.NewTicker(c.Watch)
		defer t.Stop()
		tick = t.C
	}
	load := func(why string) {
		cfg, err := rls.LoadConfig(c.ConfigPath)
		if err == nil {
			err = srv.Reload(cfg)
		}
		if err != nil {
			reloads.WithLabelValues("error").Inc()
			log.Error("configuration refused; the previous one keeps serving", "trigger", why, "err", err)
			return
		}
		reloads.WithLabelValues("ok").Inc()
		log.Info("configuration reloaded", "trigger", why)
	}
	for {
		select {
		case <-ctx.Done():
			hs.Shutdown()
			return nil
		case <-hup:
			last = fingerprint(c.ConfigPath)
			load("SIGHUP")
		case <-tick:
			if fp := fingerprint(c.ConfigPath); fp != last {
				last = fp
				load("file change")
			}
		}
	}
}

// streamWorkers is how many goroutines serve gRPC streams (each a
// decision) one after another, keeping their grown stacks: a goroutine
// per stream, gRPC's default, grows a fresh stack for nearly every
// decision. Past this many decisions in flight (waiting for Redis), gRPC
// starts a goroutine per stream again. (grpc.NumStreamWorkers is marked
// experimental in grpc-go 1.85, the version in go.mod.)
const streamWorkers = 128

// windowSize is the HTTP/2 stream and connection flow-control window.
// Setting it turns off gRPC's bandwidth-delay estimation, whose pings
// follow the data frames of a busy connection: an RLS's messages are a
// few hundred bytes, so a 1 MB window never throttles them (a request
// carrying a 1 MB descriptor value waits for one window update at most).
const windowSize = 1 << 20

// serverOptions are the gRPC server's options, chosen for many small
// unary calls (see streamWorkers and windowSize).
func serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(streamWorkers),
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
	}
}

// fingerprint is a hash of the configuration's files' names and contents
// (a change of content within one mtime tick is still seen).
func fingerprint(path string) [32]byte {
	h := sha256.New()
	names := []string{path}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		names = nil
		ents, _ := os.ReadDir(path)
		for _, e := range ents {
			names = append(names, filepath.Join(path, e.Name()))
		}
	}
	for _, n := range names {
		io.WriteString(h, n+"\x00")
		if f, err := os.Open(n); err == nil {
			io.Copy(h, io.LimitReader(f, 32<<20))
			f.Close()
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// openStore opens the store -redis names (the embedded one when empty),
// with the fleet tier over Redis reporting to obs; m watches the tier.
func openStore(ctx context.Context, c Config, m *metrics.Metrics, obs core.Observer) (core.Store, string, func(), error) {
	if c.Redis == "" {
		st, err := memstore.New()
		if err != nil {
			return nil, "", nil, err
		}
		return st, "embedded", func() { st.Close() }, nil
	}
	url := c.Redis
	if !strings.Contains(url, "://") {
		host, port, err := net.SplitHostPort(url)
		if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || strings.ContainsAny(host, "/@") {
			return nil, "", nil, fmt.Errorf("-redis %q: want host:port (e.g. localhost:6379) or a redis:// URL", url)
		}
		url = "redis://" + url
	}
	client, err := redisstore.NewClient(url)
	if err != nil {
		return nil, "", nil, fmt.Errorf("-redis: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	perr := client.Ping(pctx).Err()
	cancel()
	if perr != nil && !c.AllowDegraded {
		client.Close()
		return nil, "", nil, fmt.Errorf("-redis: Redis does not answer: %w; start it, fix -redis, or pass -allow-degraded", perr)
	}
	var ropts []redisstore.Option
	if c.Pipeline {
		ropts = append(ropts, redisstore.WithPipelining(redisstore.Pipelining{}))
	}
	rs, err := redisstore.New(client, ropts...)
	if err != nil {
		client.Close()
		return nil, "", nil, err
	}
	tier, err := fleet.New(rs, fleet.WithSync(c.Sync), fleet.WithObserver(obs), fleet.WithDefaultFailMode(core.FailOpen))
	if err != nil {
		client.Close()
		return nil, "", nil, err
	}
	m.WatchFleet()
	info := describe(client)
	if c.Pipeline {
		info += " pipelined"
	}
	if c.Sync > 0 {
		info += " (fleet tier, write-back every " + c.Sync.String() + ")"
	} else {
		info += " (fleet tier, exact)"
	}
	return tier, info, func() { tier.Close(); client.Close() }, nil
}

func describe(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return "redis " + c.Options().Addr
	case *redis.ClusterClient:
		return "redis cluster " + strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}
