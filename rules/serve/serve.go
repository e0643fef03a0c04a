// Package serve turns a rules file into middleware for any of the four
// HTTP adapters: one middleware per rule, built with the adapter's own
// NewMiddleware and the options the rule asks for (its key, tiers,
// overrides, also: checks, counting by outcome), and a dispatcher that
// picks a request's rule in the rules snapshot it acquired, reloads
// included.
//
//	srv, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: id}, set, mux)
//	// gin, echo, fiber: serve.New(cfg, set, ginlimit.NewMiddleware), then
//	// in a global middleware: snap := srv.Live().Acquire(); defer snap.Release();
//	// if mw, ok := srv.Middleware(snap, view, route); ok { run mw }
//
// # Identity
//
// [Identity] says who the caller is: its IP (key: ip), its principal
// (key: user, and identity: authenticated — a request for which User
// returns a key is authenticated), its API key (key: api_key), the
// verified claims a tier: claim:<name> reads, and how an override's
// client ("user:alice", "key:k_big", "ip:203.0.113.7") is written as
// the rule's key function's key.
//
// # Reload
//
// The rules are a [rules.Live]: [Server.Live] reloads a file (ReloadFile) or
// swaps a set (Swap); a request is decided wholly by the snapshot it
// acquired, and rules whose policy did not change keep their state (see
// rules.Live).
//
// A Server is safe for concurrent use.
package serve

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rules"
)

// Identity resolves the caller of a request for the rules' identity:,
// key:, tier: and overrides: fields. The zero value keys by the peer IP
// and treats every caller as anonymous.
type Identity struct {
	// IP resolves the client IP for key: ip and is the fallback key of
	// every rule (a rule's key that finds none falls back to the IP).
	// Default keyfuncs.PeerIP(); behind a proxy, keyfuncs.XForwardedFor.
	IP *keyfuncs.Resolver
	// User keys an authenticated caller (key: user), and a request is
	// authenticated exactly when User returns a key for it (identity:).
	// Nil: every caller is anonymous and rules keyed by user are
	// refused.
	User keyfuncs.Func
	// APIKey keys by the API key presented (key: api_key). Default:
	// keyfuncs.APIKey("X-API-Key", "").
	APIKey keyfuncs.Func
	// Claim returns a key function reading a verified JWT claim, for
	// tier: claim:<name> (keyfuncs.JWTClaim with Claim set, or
	// keyfuncs.ClaimFromContext behind an auth middleware). Nil: rules
	// whose tier is a claim are refused.
	Claim func(name string) (keyfuncs.Func, error)
	// Override returns the key rule r's key function gives the client an
	// override names ("user:alice", "key:k_big", "ip:203.0.113.7"). Nil:
	// [DefaultOverride].
	Override func(r *rules.Rule, client string) (string, error)
}

// Config configures a [Server].
type Config struct {
	// Store holds every rule's state. Required.
	Store core.Store
	// Identity resolves callers.
	Identity Identity
	// Options are added to every rule's middleware after the rule's own
	// (WithDegradedHeader, WithErrorHook, WithInFlight...).
	Options []httplimit.Option
	// LimiterOptions are given to every limiter (core.WithClock,
	// core.WithObserver, core.WithLogger).
	LimiterOptions []core.Option
	// OnBuild, when set, is called with each rule and its limiters (its
	// own, its tiers', overrides' and also: checks') once the rule's
	// middleware is built: for every rule of the set at New, and of each
	// set a Reload or Swap brings, unchanged rules included, before that
	// set serves (a set refused later in the swap never serves). Use it
	// to export what the limiters are configured with, e.g.
	// metrics.Metrics.WatchPolicy(*ls.Default.Policy()). It is called
	// under the Server's reload lock, one call at a time; it must not
	// call Reload or Swap. Nil: nothing is called.
	OnBuild func(r *rules.Rule, ls rules.Limiters)
}

// Server serves a rules set through adapter middlewares of type M
// (func(http.Handler) http.Handler, gin.HandlerFunc, echo.MiddlewareFunc,
// fiber.Handler). Build it with [New].
type Server[M any] struct {
	live *rules.Live[M]
	id   Identity
}

// New builds a middleware per rule of set with newMW (nethttp.NewMiddleware,
// ginlimit.NewMiddleware, echolimit.NewMiddleware,
// fiberlimit.NewMiddleware) and the options the rule asks for: its scope
// (the rule name: a rule's quota is its own, whatever the route), its key
// (falling back to the client IP), its tiers (WithTiers), overrides
// (WithOverrides), also: checks (WithCheck) and counting by outcome
// (WithOutcome), then cfg.Options; an error names the rule that cannot
// be served.
func New[M any](cfg Config, set *rules.Set, newMW func(*core.Limiter, ...httplimit.Option) (M, error)) (*Server[M], error) {
	if newMW == nil {
		return nil, errors.New("serve: New: nil middleware constructor; pass e.g. nethttp.NewMiddleware")
	}
	s := &Server[M]{id: cfg.Identity}
	extra := append([]httplimit.Option(nil), cfg.Options...)
	build := func(r *rules.Rule, ls rules.Limiters) (M, error) {
		opts, err := ruleOptions(r, ls, s.id)
		if err != nil {
			var zero M
			return zero, err
		}
		m, err := newMW(ls.Default, append(opts, extra...)...)
		if err == nil && cfg.OnBuild != nil {
			cfg.OnBuild(r, ls)
		}
		return m, err
	}
	live, err := rules.NewLive(cfg.Store, set, build, cfg.LimiterOptions...)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.live = live
	return s, nil
}

// Live returns the rules s serves, in their snapshots: Acquire a
// request's snapshot (and Release it once the request is done), reload a
// file (ReloadFile) or swap a set (Swap); a file or set that does not load
// leaves the current rules serving. Current and Generation tell what
// serves now. It is the same Live for the life of s.
func (s *Server[M]) Live() *rules.Live[M] { return s.live }

// authenticated reports whether Identity.User finds a key for r.
func (s *Server[M]) authenticated(r keyfuncs.Request) bool {
	if s.id.User == nil {
		return false
	}
	_, err := s.id.User(r)
	return err == nil
}

// Middleware returns the middleware of the rule of snap that r falls
// under, matched on its method, the route pattern the framework matched
// (route: r.Pattern, gin's c.FullPath(), echo's c.Path(), fiber's
// c.Route().Path; the path when empty) and whether it is authenticated;
// false when no rule matches (the request is not limited).
func (s *Server[M]) Middleware(snap *rules.Snapshot[M], r keyfuncs.Request, route string) (M, bool) {
	rule := snap.Set().Match(r.Method(), routePath(route, r.Path()), s.authenticated(r))
	return snap.Handler(rule)
}

// routePath is the path form rules match for a framework's route
// pattern: net/http's "GET host/api1" is "/api1"; an empty route falls
// back to path.
func routePath(route, path string) string {
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

// NewNetHTTP serves set in front of next on net/http: a nethttp
// middleware around next per rule, and the returned handler, which runs
// each request through its rule's (next alone when no rule matches).
// When next is a *http.ServeMux, the request's pattern is looked up first
// so that rules match on it. Reload and swap through the Server.
func NewNetHTTP(cfg Config, set *rules.Set, next http.Handler) (*Server[http.Handler], http.Handler, error) {
	if next == nil {
		return nil, nil, errors.New("serve: NewNetHTTP: nil handler; pass the mux the rules limit")
	}
	s, err := New(cfg, set, func(l *core.Limiter, opts ...httplimit.Option) (http.Handler, error) {
		mw, err := nethttp.NewMiddleware(l, opts...)
		if err != nil {
			return nil, err
		}
		return mw(next), nil
	})
	if err != nil {
		return nil, nil, err
	}
	mux, _ := next.(*http.ServeMux)
	return s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mux != nil && r.Pattern == "" {
			_, r.Pattern = mux.Handler(r)
		}
		snap := s.Live().Acquire()
		defer snap.Release()
		if h, ok := s.Middleware(snap, keyfuncs.FromHTTP(r), r.Pattern); ok {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// keyFunc is the key function of rule key k under id.
func keyFunc(k rules.Key, id Identity) (keyfuncs.Func, error) {
	switch k.Kind {
	case "", "ip":
		return ip(id).Key, nil
	case "user":
		if id.User == nil {
			return nil, errors.New("key user: the Identity has no User key function")
		}
		return id.User, nil
	case "api_key":
		if id.APIKey != nil {
			return id.APIKey, nil
		}
		return keyfuncs.APIKey("X-API-Key", "")
	case "header":
		return keyfuncs.Header(k.Header)
	case "form":
		return keyfuncs.FormField(k.Field)
	}
	return nil, fmt.Errorf("unsupported key %s", k)
}

func ip(id Identity) *keyfuncs.Resolver {
	if id.IP != nil {
		return id.IP
	}
	return keyfuncs.PeerIP()
}

// ruleOptions are the middleware options rule r asks for, on the
// limiters ls of its snapshot: its scope (the rule name: a rule's quota
// is its own, whatever the route), its key (falling back to the client
// IP), its tiers (WithTiers), overrides (WithOverrides), also: checks
// (WithCheck) and counting by outcome (WithOutcome). Pass the result,
// with ls.Default, to an adapter's NewMiddleware.
func ruleOptions(r *rules.Rule, ls rules.Limiters, id Identity) ([]httplimit.Option, error) {
	fail := func(err error) ([]httplimit.Option, error) { return nil, err } // the caller names the rule
	opts := []httplimit.Option{httplimit.WithScope(r.Name)}
	if r.Key.String() == "ip" {
		opts = append(opts, httplimit.WithIPKey(ip(id)))
	} else {
		k, err := keyFunc(r.Key, id)
		if err != nil {
			return fail(err)
		}
		opts = append(opts, httplimit.WithKey(k))
		if r.Key.Kind == "form" {
			// the handler reads the username counted (Identity), never
			// one it parses again; other keys' requests carry none
			opts = append(opts, httplimit.WithIdentity())
		}
	}
	// Without a key (an identity that vanished between match and
	// decision, a missing header or form field) the client IP keys.
	opts = append(opts, httplimit.WithFallbackKey(ip(id).Key))
	if r.Tier != "" {
		var tier keyfuncs.Func
		var err error
		switch kind, name, _ := strings.Cut(r.Tier, ":"); kind {
		case "claim":
			if id.Claim == nil {
				return fail(fmt.Errorf("tier %s: the Identity has no Claim function", r.Tier))
			}
			tier, err = id.Claim(name)
		case "header":
			tier, err = keyfuncs.Header(name)
		default:
			err = fmt.Errorf("tier %q: not claim:<name> or header:<Name>", r.Tier)
		}
		if err != nil {
			return fail(err)
		}
		opts = append(opts, httplimit.WithTiers(tier, ls.Tiers))
	}
	if len(r.Overrides) > 0 {
		over := id.Override
		if over == nil {
			over = func(r *rules.Rule, client string) (string, error) { return DefaultOverride(r, client, id) }
		}
		byKey := make(map[string]*core.Limiter, len(r.Overrides))
		for _, o := range r.Overrides {
			k, err := over(r, o.Client)
			if err != nil {
				return fail(err)
			}
			byKey[k] = ls.Overrides[o.Client]
		}
		opts = append(opts, httplimit.WithOverrides(byKey))
	}
	for i, c := range r.Also {
		var k keyfuncs.Func
		var err error
		if k, err = keyFunc(c.Key, id); err != nil {
			return fail(fmt.Errorf("also %q: %w", c.Name, err))
		}
		opts = append(opts, httplimit.WithCheck(ls.Also[i], k))
	}
	if c := r.Count; c != nil {
		opts = append(opts, httplimit.WithOutcome(httplimit.Outcome{Count: c.Counts, ResetOnSuccess: c.ResetOnSuccess, ChargeFirst: c.ChargeFirst}))
	}
	if ls.Concurrency != nil {
		opts = append(opts, httplimit.WithConcurrency(ls.Concurrency))
	}
	return opts, nil
}

// DefaultOverride writes an override's client as the key of rule r's
// key function when that function is the one [New] chooses for the rule under
// id: "user:<v>" is keyfuncs.Bound(v) for a rule keyed by user (User
// returning the bare subject, as keyfuncs.JWTClaim does), "key:<v>" the
// API key function's key of v, "ip:<v>" the IP key of v. A client of a
// kind the rule's key cannot yield is an error (the override could never
// match). Identities whose User tags its keys (keyfuncs.Tagged) write
// their own Identity.Override.
func DefaultOverride(r *rules.Rule, client string, id Identity) (string, error) {
	kind, v, _ := strings.Cut(client, ":")
	switch {
	case r.Key.Kind == "user" && kind == "user":
		return keyfuncs.Bound(v), nil
	case r.Key.Kind == "api_key" && kind == "key":
		return apiKeyOf(id, v)
	case r.Key.String() == "ip" && kind == "ip":
		return ipKeyOf(id, v)
	}
	return "", fmt.Errorf("override %q cannot match a rule keyed by %s (user rules take user:, api_key rules key:, ip rules ip:)", client, r.Key)
}

// apiKeyOf is the key the API key function of id gives a request
// presenting key in X-API-Key.
func apiKeyOf(id Identity, key string) (string, error) {
	f, err := keyFunc(rules.Key{Kind: "api_key"}, id)
	if err != nil {
		return "", err
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", key)
	return f(keyfuncs.FromHTTP(r))
}

// ipKeyOf is the IP key of id for a client at addr.
func ipKeyOf(id Identity, addr string) (string, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "", err
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = netip.AddrPortFrom(a, 1).String()
	return ip(id).Key(keyfuncs.FromHTTP(r))
}
