// Package exampleapp is the wiring the programs under _examples share:
// their command-line flags, the store (embedded or Redis), the rules file,
// the callers' identity, the metrics, and the serve.Config with which each
// program serves the rules through its adapter (package rules/serve: one
// limiter and one adapter middleware per rule, and the request's rule
// picked in the rules snapshot it acquired). It lives beside the examples, not in internal/, so
// that an example copied into another module still builds (it imports
// github.com/limitkit/limitkit/_examples/exampleapp); it is no API of
// limitkit's. Applications serve their rules files with package
// rules/serve, which this package builds on (a middleware per rule with
// the options the rule asks for); what is left here is the examples' own
// wiring (flags, store, metrics, identity, reload logging).
//
// # Identity
//
// A caller is authenticated when it presents either an HS256 JWT whose
// signature verifies with the configured secret (Authorization: Bearer;
// its "sub" is the user) or an X-API-Key listed in LIMITKIT_API_KEYS. An
// invalid or expired token is not an identity: the caller is anonymous
// and limited by IP, never by the user the token claims.
//
// # Serving the rules
//
// The examples serve the rules with package rules/serve, as an
// application would: serve.New(app.ServeConfig(), app.Rules, newMW)
// builds one adapter middleware per rule (the adapter's own
// NewMiddleware, the options the rule asks for (serve.New builds them) and
// [DegradedHeader]) and keeps them in a [rules.Live]: a snapshot replaced
// as a whole when the rules file is reloaded. For each request, the
// example acquires the snapshot serving now (Server.Live().Acquire), asks
// Server.Middleware for the rule matching the method, the route pattern
// the framework matched (or the path when there is none) and whether the
// caller is authenticated, and hands the request to that rule's
// middleware, which decides; the request releases the snapshot when done,
// so it is decided wholly by one set of rules. A request that matches no
// rule is not limited, and [MetricsPath] is never given to the rules.
// Each rule's quota is its own (the rule name is the key scope), so
// "anonymous-get" on /* is one quota per IP across every GET path.
//
// # Reload
//
// [App.StartReloads] reloads the -rules file into the serve.Server on
// SIGHUP and, with -watch, when its content changes; [App.ReloadRules]
// does it once. A file that
// does not validate is rejected, every problem logged with its line, and
// the rules serving keep serving. On success the change is logged (rules
// added, removed, whose limits changed, updated, unchanged). Rules whose
// name and limits did not change keep their state; see [rules.Live] for
// the rest.
//
// The identity check runs twice per request (once to match, once in the
// rule's key function); that is a JWT verification more than a production
// setup would do, which would verify once in an auth middleware and key by
// keyfuncs.ClaimFromContext.
package exampleapp

import (
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/metrics"
	"github.com/limitkit/limitkit/otellimit"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"

	// the IANA zones of calendar limits ("5 per calendar month",
	// timezone: Europe/Berlin) load in an image without a zone database
	_ "time/tzdata"
)

// Environment variables the examples read.
const (
	// EnvJWTSecret is the HS256 secret when -jwt-secret is not given.
	EnvJWTSecret = "LIMITKIT_JWT_SECRET"
	// EnvAPIKeys is a comma-separated list of valid API keys.
	EnvAPIKeys = "LIMITKIT_API_KEYS"
	// EnvAdminToken is the admin surface's bearer token when
	// -admin-token is not given.
	EnvAdminToken = "LIMITKIT_ADMIN_TOKEN"
)

// Config is what the flags and the environment configure.
type Config struct {
	// Addr is the listen address (-addr). Default ":8080".
	Addr string
	// Redis is the Redis server (-redis): host:port, or a redis://,
	// rediss:// (TLS) or unix:// URL with optional user, password and
	// database, several hosts for a Cluster, ?master_name= for Sentinel
	// (see [RedisClient]); empty means the embedded store.
	Redis string
	// AllowDegraded starts the app even when the Redis server fails its
	// start-up check (-allow-degraded); each rule's fail mode then decides
	// until Redis answers.
	AllowDegraded bool
	// RulesFile is a rules file (-rules); empty means rules.Default().
	RulesFile string
	// TrustedProxies are the CIDRs of proxies whose X-Forwarded-For is
	// believed (-trusted-proxies, comma-separated). Empty: the client IP is
	// the TCP peer and the header is ignored.
	TrustedProxies []string
	// JWTSecret is the HS256 secret (-jwt-secret, else LIMITKIT_JWT_SECRET).
	// Empty: [New] generates a random one and [App.SampleToken] is set.
	JWTSecret string
	// APIKeys are the valid X-API-Key values (LIMITKIT_API_KEYS).
	APIKeys []string
	// Sync is the fleet tier's write-back sync interval (-sync) in front of
	// Redis: 0 (the default) is exact mode (every decision at Redis, with
	// the exact deny cache and the circuit breaker); above 0, hot keys are
	// decided locally from leased quota and synced at this interval. A
	// rule's mode and sync override it. Ignored without Redis.
	Sync time.Duration
	// FleetSize is the number of app servers sharing Redis (-fleet-size,
	// default 1): a rule with fail_mode local divides its limits by it
	// while Redis is unreachable. A rule's fleet_size overrides it.
	FleetSize int
	// Watch is the interval at which the rules file is checked for
	// changes (-watch; needs -rules): 0, the default, reloads it on
	// SIGHUP only. See [App.StartReloads].
	Watch time.Duration
	// OTel turns OpenTelemetry on (-otel): "stdout" ([OTelStdout]) prints
	// the otellimit metrics every [OTelInterval] and every request's span,
	// with its limitkit.decision event, to standard output as JSON; empty
	// (the default) is Prometheus only.
	OTel string
	// AdminToken turns the operators' surface on (-admin-token, else
	// LIMITKIT_ADMIN_TOKEN): GET and DELETE serve.AdminPath +
	// "<rule>/<identity>" with "Authorization: Bearer <token>" read and
	// reset a rule's counters of one identity ([Admin]). Empty (the
	// default): not mounted.
	AdminToken string
}

// ParseFlags parses the examples' flags — -addr, -redis, -rules,
// -trusted-proxies, -jwt-secret, -allow-degraded, -sync, -fleet-size,
// -watch, -otel and -admin-token —
// from args, reading the environment
// through getenv (os.Getenv when nil).
func ParseFlags(name string, args []string, getenv func(string) string) (Config, error) {
	return ParseFlagsAddr(name, ":8080", args, getenv)
}

// ParseFlagsAddr is [ParseFlags] with another default -addr (the gRPC
// example's ":50051").
func ParseFlagsAddr(name, defaultAddr string, args []string, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var cfg Config
	var proxies string
	fs.StringVar(&cfg.Addr, "addr", defaultAddr, "listen address")
	fs.StringVar(&cfg.Redis, "redis", "", "Redis server: host:port, redis://[user:password@]host:port[/db], rediss:// (TLS), redis://host1:port1,host2:port2 (a Cluster) or redis://sentinel:26379?master_name=name (Sentinel); empty means the embedded in-memory store")
	fs.StringVar(&cfg.RulesFile, "rules", "", "rules file (YAML or .json); empty means the embedded endpoint table")
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated CIDRs of proxies whose X-Forwarded-For is trusted")
	fs.StringVar(&cfg.JWTSecret, "jwt-secret", "", "HS256 secret for Bearer tokens (default $"+EnvJWTSecret+")")
	fs.BoolVar(&cfg.AllowDegraded, "allow-degraded", false, "start even when the -redis server fails its start-up check; each rule's fail mode decides until it answers")
	fs.DurationVar(&cfg.Sync, "sync", 0, "with -redis: the fleet tier's write-back sync interval (e.g. 100ms); 0 = exact: every decision at Redis, behind the exact deny cache and the circuit breaker")
	fs.IntVar(&cfg.FleetSize, "fleet-size", 1, "with -redis: app servers sharing Redis; rules with fail_mode local divide their limits by it while Redis is down")
	fs.DurationVar(&cfg.Watch, "watch", 0, "with -rules: also reload the rules file when its content changes, checking it at this interval (e.g. 2s); 0 = reload on SIGHUP only")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "serve the admin surface at "+serve.AdminPath+"<rule>/<identity> (GET usage, DELETE reset) to requests with Authorization: Bearer <this token> (default $"+EnvAdminToken+"); empty: not served")
	fs.StringVar(&cfg.OTel, "otel", "", `"stdout": also export OpenTelemetry metrics (every 10s) and each request's span with its limitkit.decision event to standard output as JSON; empty means Prometheus only`)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("%s: unexpected arguments %q", name, fs.Args())
	}
	// the fleet tier's bounds (core.Policy's Sync and FleetSize)
	const maxSync, maxFleetSize = time.Hour, 100_000
	if cfg.Sync < 0 || cfg.Sync > maxSync {
		return Config{}, fmt.Errorf("%s: -sync %v: want 0 (exact) or a write-back interval up to %v, e.g. -sync 100ms", name, cfg.Sync, maxSync)
	}
	if cfg.FleetSize < 1 || cfg.FleetSize > maxFleetSize {
		return Config{}, fmt.Errorf("%s: -fleet-size %d: want the number of app servers sharing Redis, 1 to %d", name, cfg.FleetSize, maxFleetSize)
	}
	if cfg.OTel != "" && cfg.OTel != OTelStdout {
		return Config{}, fmt.Errorf("%s: -otel %q: want %q or nothing", name, cfg.OTel, OTelStdout)
	}
	if err := checkWatch(cfg); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	cfg.TrustedProxies = splitList(proxies)
	if cfg.JWTSecret == "" {
		cfg.JWTSecret = getenv(EnvJWTSecret)
	}
	cfg.APIKeys = splitList(getenv(EnvAPIKeys))
	if cfg.AdminToken == "" {
		cfg.AdminToken = getenv(EnvAdminToken)
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// App is the shared state of an example server. Build it with [New]; it
// is safe for concurrent use; Close releases the store.
type App struct {
	// Rules is the rules file loaded at start-up, with the capacity
	// signals of its elastic rules: serve it with [App.ServeConfig]. The
	// serve.Server may have reloaded it since (see [App.StartReloads]):
	// its Current is the set serving now.
	Rules *rules.Set
	// Store holds the limiters' state.
	Store core.Store
	// StoreInfo names the store for logs: "embedded in-memory store" or
	// "redis <address>" (never a password).
	StoreInfo string
	// StoreErr is the failed start-up check of a Redis store the app was
	// allowed to start with (-allow-degraded), or nil.
	StoreErr error
	// RulesInfo names the rules in use: the file, or the embedded table.
	RulesInfo string
	// Metrics receives every limiter's decisions; Registry holds it and
	// the Go runtime's collectors, and is what [App.MetricsHandler] serves.
	Metrics  *metrics.Metrics
	Registry *prometheus.Registry
	// OTel receives every limiter's decisions too when OpenTelemetry is on
	// (-otel, [WithOTelProviders]), and nil otherwise.
	OTel *otellimit.Observer
	// IP resolves the client IP (peer, or X-Forwarded-For from trusted
	// proxies).
	IP *keyfuncs.Resolver
	// Principal keys an authenticated caller: the JWT's sub tagged "user",
	// or the hash of a listed API key tagged "key" (keyfuncs.Tagged); an
	// error for an anonymous caller.
	Principal keyfuncs.Func
	// SampleToken is a token for user "alice" valid for an hour, set when
	// the secret was generated (so the example can be tried with curl).
	SampleToken string
	// InFlight counts the requests the rules' middlewares are handling
	// (httplimit.WithInFlight): the load of elastic rules' max_in_flight.
	InFlight core.InFlight

	secret    []byte
	jwtKey    keyfuncs.Func
	listedKey keyfuncs.Func
	lopts     []core.Option  // every limiter's: clock, observer, logger, store deadline
	signals   *rules.Signals // elastic rules' capacity signals, kept across reloads
	closers   []func() error
	reload    reloadState
	tracer    trace.Tracer // the request spans' tracer when OTel is on
	admin     string       // -admin-token; empty: no admin surface
}

// Option configures [New].
type Option func(*options)

type options struct {
	rules       *rules.Set // without -rules, instead of rules.Default()
	rulesInfo   string
	anyAPIKey   bool
	client      redis.UniversalClient
	clock       core.Clock
	logger      *slog.Logger
	logSet      bool
	logInterval time.Duration
	timeout     time.Duration
	otelOut     io.Writer
	mp          metric.MeterProvider
	tp          trace.TracerProvider
}

// WithRedisClient makes the app use a Redis store on client (a
// ClusterClient, say) instead of what Config.Redis says. The client must
// set ContextTimeoutEnabled. The caller keeps ownership of client.
func WithRedisClient(c redis.UniversalClient) Option { return func(o *options) { o.client = c } }

// WithDefaultRules serves s, described as info in the start-up line,
// when there is no -rules file, instead of rules.Default() (the HTTP
// endpoint table): the gRPC example's rules match method names.
func WithDefaultRules(s *rules.Set, info string) Option {
	return func(o *options) { o.rules, o.rulesInfo = s, info }
}

// WithAnyAPIKey makes every non-empty X-API-Key an identity when
// LIMITKIT_API_KEYS lists none (an example without a key registry, keyed
// per API key as sent); a listed set still restricts identities to it.
func WithAnyAPIKey() Option { return func(o *options) { o.anyAPIKey = true } }

// WithClock gives every limiter clock c (tests).
func WithClock(c core.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sends the limiters' store-failure lines to l instead of
// slog.Default() (core.WithLogger; nil silences them).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger, o.logSet = l, true } }

// WithLogInterval sets the least time between two store-failure lines of
// a limiter (core.WithLogInterval; default 10 s).
func WithLogInterval(d time.Duration) Option { return func(o *options) { o.logInterval = d } }

// WithStoreTimeout sets every limiter's store deadline
// (core.WithTimeout; default core.DefaultTimeout): tests whose subject is
// not the deadline raise it so that a loaded machine does not fail them.
func WithStoreTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// New loads the rules and opens the store; serve the rules with
// [App.ServeConfig].
func New(cfg Config, opts ...Option) (*App, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	a := &App{admin: cfg.AdminToken}
	if err := a.loadRules(cfg, &o); err != nil {
		return nil, err
	}
	if err := a.setupIdentity(cfg, &o); err != nil {
		return nil, err
	}
	a.Metrics = metrics.MustNew()
	a.Registry = prometheus.NewRegistry()
	a.Registry.MustRegister(a.Metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.setupOTel(cfg, &o); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.openStore(cfg, &o); err != nil {
		a.Close()
		return nil, err
	}
	a.lopts = o.limiterOptions(a.observer())
	a.reload.file, a.reload.watch = cfg.RulesFile, cfg.Watch
	a.reload.logger, a.reload.logSet = o.logger, o.logSet
	// elastic rules: capacity limits in the store, load on a.InFlight
	a.signals = rules.NewSignals(rules.SignalEnv{Store: a.Store, InFlight: &a.InFlight, Options: a.lopts})
	var err error
	if a.Rules, err = a.Rules.WithSignals(a.signals); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// loadRules sets the rules: the -rules file, else WithDefaultRules', else
// rules.Default().
func (a *App) loadRules(cfg Config, o *options) error {
	a.Rules, a.RulesInfo = rules.Default(), "embedded endpoint table (rules/default.yaml)"
	if o.rules != nil {
		a.Rules, a.RulesInfo = o.rules, o.rulesInfo
	}
	if cfg.RulesFile != "" {
		s, sum, err := readRules(cfg.RulesFile)
		if err != nil {
			return err
		}
		a.Rules, a.RulesInfo = s, cfg.RulesFile
		a.reload.sum = sum
	}
	return nil
}

// setupIdentity sets how callers are known: the client IP (-trusted-
// proxies), the JWT secret (generated, with a sample token, when none is
// configured) and the principal: a verified JWT's sub, or a listed API
// key (any key with WithAnyAPIKey and none listed).
func (a *App) setupIdentity(cfg Config, o *options) error {
	var err error
	if len(cfg.TrustedProxies) > 0 {
		a.IP, err = keyfuncs.XForwardedFor(cfg.TrustedProxies...)
		if err != nil {
			return fmt.Errorf("-trusted-proxies: %w", err)
		}
	} else {
		a.IP = keyfuncs.PeerIP()
	}
	a.secret = []byte(cfg.JWTSecret)
	if len(a.secret) == 0 {
		a.secret = make([]byte, 32)
		_, _ = rand.Read(a.secret)
		a.SampleToken, err = a.Token("alice", time.Hour)
		if err != nil {
			return err
		}
	}
	jwtKey, err := keyfuncs.JWTClaim(keyfuncs.JWTConfig{Methods: []string{"HS256"}, Key: a.secret})
	if err != nil {
		return err
	}
	apiKey, err := keyfuncs.APIKey("X-API-Key", "")
	if err != nil {
		return err
	}
	valid := make([][]byte, len(cfg.APIKeys))
	for i, k := range cfg.APIKeys {
		valid[i] = []byte(k)
	}
	listedKey := func(r keyfuncs.Request) (string, error) {
		raw := []byte(r.Header("X-API-Key"))
		if len(raw) == 0 {
			return "", keyfuncs.ErrNoKey
		}
		if o.anyAPIKey && len(valid) == 0 {
			return apiKey(r)
		}
		for _, v := range valid {
			if hmac.Equal(raw, v) {
				return apiKey(r)
			}
		}
		return "", errors.New("exampleapp: unknown API key")
	}
	a.jwtKey, a.listedKey = jwtKey, listedKey
	a.Principal = keyfuncs.FirstOf(keyfuncs.Tagged("user", jwtKey), keyfuncs.Tagged("key", listedKey))
	return nil
}

// limiterOptions are every limiter's options: the observer, and the
// clock, logger, log interval and store deadline New was given.
func (o *options) limiterOptions(obs core.Observer) []core.Option {
	lopts := []core.Option{core.WithObserver(obs)}
	if o.clock != nil {
		lopts = append(lopts, core.WithClock(o.clock))
	}
	if o.logSet {
		lopts = append(lopts, core.WithLogger(o.logger))
	}
	if o.logInterval != 0 {
		lopts = append(lopts, core.WithLogInterval(o.logInterval))
	}
	if o.timeout != 0 {
		lopts = append(lopts, core.WithTimeout(o.timeout))
	}
	return lopts
}

// ServeConfig is the serve.Config that serves the app's rules: the
// store, the callers' [App.Identity], [DegradedHeader] and the in-flight
// count ([App.InFlight], the load of elastic rules) on every rule's
// middleware, the limiters' options (the observer feeding Metrics and
// OTel, and New's clock, logger and store deadline), and an OnBuild that
// exports every limiter's configured limits to Metrics (and OTel) as its
// rule's middleware is built. Serve a.Rules through an adapter with it:
//
//	srv, err := serve.New(app.ServeConfig(), app.Rules, ginlimit.NewMiddleware)
//
// and reload into srv with [App.StartReloads].
func (a *App) ServeConfig() serve.Config {
	return serve.Config{
		Store:          a.Store,
		Identity:       a.Identity(),
		Options:        []httplimit.Option{httplimit.WithDegradedHeader(DegradedHeader), httplimit.WithInFlight(&a.InFlight)},
		LimiterOptions: a.lopts,
		OnBuild:        a.watchLimiters,
	}
}

// Close releases the store (and the Redis client New opened).
func (a *App) Close() error {
	var errs []error
	for _, c := range a.closers {
		errs = append(errs, c())
	}
	a.closers = nil
	return errors.Join(errs...)
}

// Token returns an HS256 token for user sub, signed with the app's
// secret, expiring after ttl.
func (a *App) Token(sub string, ttl time.Duration) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   sub,
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(ttl)),
	})
	return t.SignedString(a.secret)
}

// Caller describes r's caller for responses and logs: "user/alice",
// "key/<first 8 hex digits of the key's hash>", or "anonymous <ip>".
func (a *App) Caller(r keyfuncs.Request) string {
	if u, err := a.jwtKey(r); err == nil {
		return "user/" + u
	}
	if k, err := a.listedKey(r); err == nil {
		return "key/" + k[:min(8, len(k))]
	}
	ip, err := a.IP.ClientIP(r)
	if err != nil {
		return "anonymous"
	}
	return "anonymous " + ip.String()
}

// RoutePath turns a framework's route pattern into the path form rules
// match (as serve's dispatcher does): net/http's "GET host/api1" becomes
// "/api1"; an empty route falls back to path.
func RoutePath(route, path string) string {
	if i := strings.IndexByte(route, ' '); i >= 0 {
		route = strings.TrimLeft(route[i+1:], " ")
	}
	if route != "" && route[0] != '/' {
		if i := strings.IndexByte(route, '/'); i >= 0 {
			route = route[i:] // drop a host
		} else {
			route = ""
		}
	}
	if route == "" {
		return path
	}
	return route
}

// Reply is the JSON body the example API answers with.
func Reply(endpoint, caller string) []byte {
	return fmt.Appendf(nil, `{"ok":true,"endpoint":%q,"caller":%q}`+"\n", endpoint, caller)
}
