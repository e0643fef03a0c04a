package exampleapp

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
)

// MetricsPath is where the examples serve their Prometheus metrics.
const MetricsPath = "/metrics"

// DegradedHeader is set to "1" on a response the examples admitted
// because the store failed and the rule fails open: the request was not
// limited.
const DegradedHeader = "X-RateLimit-Degraded"

// CheckTimeout bounds the start-up check of a Redis store.
const CheckTimeout = 3 * time.Second

// openStore builds the store the limiters share and sets a.Store,
// a.StoreInfo and a.StoreErr: a Redis store on the client WithRedisClient
// gave or on -redis, checked with redisstore.Check (an unusable server is
// an error unless cfg.AllowDegraded); else the embedded store, watched by
// the metrics. A store tier in front of Redis belongs here too.
func (a *App) openStore(cfg Config, o *options) error {
	var client redis.UniversalClient
	switch {
	case o.client != nil:
		client = o.client
		a.StoreInfo = describeClient(o.client)
	case cfg.Redis != "":
		c, err := RedisClient(cfg.Redis)
		if err != nil {
			return err
		}
		a.closers = append(a.closers, c.Close)
		client = c
		a.StoreInfo = describeClient(c)
	default:
		st, err := memstore.New()
		if err != nil {
			return err
		}
		a.Store = st
		a.closers = append(a.closers, st.Close)
		a.Metrics.WatchMemstore("default", st)
		a.StoreInfo = "embedded in-memory store (limits are per process; -redis shares them between instances)"
		return nil
	}
	st, err := redisstore.New(client)
	if err != nil {
		return err
	}
	// The fleet tier always sits in front of Redis: its deny cache is
	// exact and its breaker acts only on failure; write-back only with
	// -sync > 0 (or a rule's mode: write-back).
	fleetSize := cfg.FleetSize
	if fleetSize == 0 {
		fleetSize = 1
	}
	// The rules file states each rule's fail mode (open is the zero value,
	// which the tier would otherwise fail local): keep them as written.
	tier, err := fleet.New(st, fleet.WithSync(cfg.Sync), fleet.WithFleetSize(fleetSize), fleet.WithObserver(a.observer()),
		fleet.WithDefaultFailMode(core.FailOpen))
	if err != nil {
		return err
	}
	// closed before the Redis client, so its last sync still reaches Redis
	a.closers = append([]func() error{tier.Close}, a.closers...)
	a.Store = tier
	// the tier's series (breaker state, syncs, fallbacks, its local
	// store) exist from the first scrape, before any incident
	a.Metrics.WatchFleet()
	a.Metrics.WatchMemstore("fleet", tier)
	tierInfo := fmt.Sprintf(" behind the fleet tier (exact; deny cache; circuit breaker; fleet size %d)", fleetSize)
	if cfg.Sync > 0 {
		tierInfo = fmt.Sprintf(" behind the fleet tier (write-back, sync %v; deny cache; circuit breaker; fleet size %d)", cfg.Sync, fleetSize)
	}
	defer func() { a.StoreInfo += tierInfo }()
	ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
	defer cancel()
	if err := st.Check(ctx); err != nil {
		if !cfg.AllowDegraded {
			return fmt.Errorf("%s is not usable: %w\n"+
				"  start Redis there, or fix the address (-redis host:port, redis://[user:password@]host:port[/db] or rediss:// for TLS; -cluster in the cluster example);\n"+
				"  or pass -allow-degraded to serve anyway: until Redis answers, rules with fail mode open admit every request unlimited and rules with fail mode closed answer 503", a.StoreInfo, err)
		}
		a.StoreErr = err
	}
	return nil
}

// RedisClient returns the go-redis client for the -redis value s:
// host:port, or a URL redisstore.NewClient accepts (redis://, rediss://
// for TLS; user, password, database and options such as
// ?dial_timeout=1s in the URL; comma-separated hosts for a Cluster,
// ?master_name= for Sentinel), tuned by redisstore.NewClient for a rate
// limiter.
func RedisClient(s string) (redis.UniversalClient, error) {
	if !strings.Contains(s, "://") {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return nil, fmt.Errorf("-redis %q: %w; want host:port (e.g. localhost:6379) or a redis:// URL", s, err)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil || strings.ContainsAny(host, "/@") {
			return nil, fmt.Errorf("-redis %q: not host:port; want host:port (e.g. localhost:6379) or a redis:// URL", s)
		}
		s = "redis://" + s
	}
	c, err := redisstore.NewClient(s)
	if err != nil {
		return nil, fmt.Errorf("-redis %q: %w", redact(s), err)
	}
	return c, nil
}

// ClusterClient returns the go-redis Cluster client for the -cluster
// value s: comma-separated host:port seeds, or a redis:// (rediss://)
// URL of one or more seeds (redis://host1:7000,host2:7001), tuned by
// redisstore.NewClient.
func ClusterClient(s string) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(strings.ReplaceAll(s, " ", ""), "://")
	if !ok {
		scheme, rest = "redis", scheme
	}
	if rest == "" || (scheme != "redis" && scheme != "rediss") {
		return nil, fmt.Errorf("-cluster %q: want host:port,host:port,... or redis://host:port,host:port", redact(s))
	}
	c, err := redisstore.NewClient(scheme + "+cluster://" + rest)
	if err != nil {
		return nil, fmt.Errorf("-cluster %q: %w", redact(s), err)
	}
	return c, nil
}

// redact hides a URL's password.
func redact(s string) string {
	at := strings.LastIndexByte(s, '@')
	i := strings.Index(s, "://")
	if at < 0 || i < 0 || at < i {
		return s
	}
	return s[:i+3] + "***" + s[at:]
}

// describeClient names a Redis client's servers, without credentials.
func describeClient(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		d := "redis " + o.Addr
		if o.DB != 0 {
			d += " db " + strconv.Itoa(o.DB)
		}
		if o.TLSConfig != nil {
			d += " (TLS)"
		}
		return d
	case *redis.ClusterClient:
		return "redis cluster " + strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		return "redis ring " + ringList(c.Options().Addrs)
	}
	return "redis"
}

func ringList(m map[string]string) string {
	var out []string
	for _, a := range m {
		out = append(out, a)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// MetricsHandler serves the app's metrics registry in the Prometheus text
// format.
func (a *App) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{Registry: a.Registry})
}

// FailModes summarizes the rules' fail modes: "open (api1-get,
// anonymous-get); closed (login)".
func (a *App) FailModes() string {
	by := map[core.FailMode][]string{}
	for _, r := range a.Rules.Rules() {
		by[r.FailMode] = append(by[r.FailMode], r.Name)
	}
	var parts []string
	for _, m := range []core.FailMode{core.FailOpen, core.FailClosed, core.FailLocal} {
		if len(by[m]) > 0 {
			parts = append(parts, m.String()+" ("+strings.Join(by[m], ", ")+")")
		}
	}
	return strings.Join(parts, "; ")
}

// Listen binds addr (the -addr flag), with an error that says what to
// change.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-addr %s: %w; pick another address or port with -addr (e.g. -addr :8081), or stop what uses it", addr, err)
	}
	return ln, nil
}

// CutFlag takes a program's own flag -name (or --name; "-name value" or
// "-name=value") out of args, for a flag besides the shared ones that
// [ParseFlags] reads (redis-cluster's -cluster, grpc's -metrics-addr): it
// returns the last value given, whether one was, and the other arguments
// in order. A -name with no value after it is dropped.
func CutFlag(args []string, name string) (value string, found bool, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-"+name || a == "--"+name:
			if i+1 < len(args) {
				value, found = args[i+1], true
				i++
			}
		case strings.HasPrefix(a, "-"+name+"=") || strings.HasPrefix(a, "--"+name+"="):
			value, found = a[strings.IndexByte(a, '=')+1:], true
		default:
			rest = append(rest, a)
		}
	}
	return value, found, rest
}

// Start is what every example's main does before serving: it parses the
// flags from args (flag.ErrHelp for -h), builds the App with opts (a Redis
// server is checked: see [Config.AllowDegraded]) and binds -addr. Every
// error says what to fix; the caller prints it and exits non-zero, before
// anything says "listening". It routes go-redis's own log lines through
// slog, at most one every ten seconds (a dead server would otherwise log
// one per dial), since the limiters log the failures themselves.
func Start(name string, args []string, opts ...Option) (*App, net.Listener, error) {
	cfg, err := ParseFlags(name, args, nil)
	if err != nil {
		return nil, nil, err
	}
	redisLogOnce.Do(func() { redis.SetLogger(&redisLogger{}) })
	app, err := New(cfg, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	ln, err := Listen(cfg.Addr)
	if err != nil {
		app.Close()
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return app, ln, nil
}

// StartupLine is the line an example logs once it can serve on ln: where,
// which store, which rules, which fail modes, where the metrics are.
func (a *App) StartupLine(name string, ln net.Addr) string {
	host := ln.String()
	if tcp, ok := ln.(*net.TCPAddr); ok && (tcp.IP == nil || tcp.IP.IsUnspecified()) {
		host = net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))
	}
	n := len(a.Rules.Rules())
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return fmt.Sprintf("%s example listening on %s; store: %s; rules: %s (%d rule%s); fail modes: %s; metrics: http://%s%s; store failures are logged",
		name, ln, a.StoreInfo, a.RulesInfo, n, plural, a.FailModes(), host, MetricsPath)
}

// LogStartup logs, with the log package: a warning when the app started
// without a usable store (-allow-degraded), the sample token when the JWT
// secret was generated, and the start-up line.
func (a *App) LogStartup(name string, ln net.Listener) {
	if a.StoreErr != nil {
		log.Printf("WARNING: %s started degraded (-allow-degraded): %v; until the store answers, each rule's fail mode decides (open: requests are not limited; closed: 503)", name, a.StoreErr)
	}
	if a.SampleToken != "" {
		log.Printf("no -jwt-secret: generated one; a token for user alice:\n%s", a.SampleToken)
	}
	log.Print(a.StartupLine(name, ln.Addr()))
}

// redisLogger passes go-redis's internal log lines to slog at level WARN,
// at most one every ten seconds, with the number suppressed meanwhile.
type redisLogger struct {
	next       atomic.Int64
	suppressed atomic.Int64
}

const redisLogInterval = 10 * time.Second

var redisLogOnce sync.Once

func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	now := time.Now().UnixNano()
	next := l.next.Load()
	if now < next || !l.next.CompareAndSwap(next, now+int64(redisLogInterval)) {
		l.suppressed.Add(1)
		return
	}
	slog.WarnContext(ctx, "go-redis: "+fmt.Sprintf(format, v...), "suppressed", l.suppressed.Swap(0), "interval", redisLogInterval)
}
