package limitmw

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/mwconf"
	"github.com/limitkit/limitkit/keyfuncs"
)

// The middleware vocabulary is package httplimit's; these aliases keep
// the engine's code and tests in its terms.
type (
	// Option is httplimit.Option.
	Option = httplimit.Option
	// Rejection is httplimit.Rejection.
	Rejection = httplimit.Rejection
	// Reason is httplimit.Reason.
	Reason = httplimit.Reason
	// HeaderSet is httplimit.HeaderSet.
	HeaderSet = httplimit.HeaderSet
	// ResetFormat is httplimit.ResetFormat.
	ResetFormat = httplimit.ResetFormat
	// NoKeyMode is httplimit.NoKeyMode.
	NoKeyMode = httplimit.NoKeyMode
)

// Constants of package httplimit.
const (
	ReasonLimited     = httplimit.ReasonLimited
	ReasonUnavailable = httplimit.ReasonUnavailable
	ReasonNoKey       = httplimit.ReasonNoKey
	HeaderXRateLimit  = httplimit.HeaderXRateLimit
	HeaderRetryAfter  = httplimit.HeaderRetryAfter
	HeaderIETF        = httplimit.HeaderIETF
	HeaderNone        = httplimit.HeaderNone
	HeaderDefault     = httplimit.HeaderDefault
	ResetEpoch        = httplimit.ResetEpoch
	ResetDelta        = httplimit.ResetDelta
	NoKeyFallback     = httplimit.NoKeyFallback
	NoKeySkip         = httplimit.NoKeySkip
	NoKeyDeny         = httplimit.NoKeyDeny
)

// The options of package httplimit, for the engine's tests.
var (
	WithKey            = httplimit.WithKey
	WithIPKey          = httplimit.WithIPKey
	WithCheck          = httplimit.WithCheck
	WithScope          = httplimit.WithScope
	WithScopeFunc      = httplimit.WithScopeFunc
	WithSkip           = httplimit.WithSkip
	WithCost           = httplimit.WithCost
	WithNoKey          = httplimit.WithNoKey
	WithFallbackKey    = httplimit.WithFallbackKey
	WithHeaders        = httplimit.WithHeaders
	WithResetFormat    = httplimit.WithResetFormat
	WithDegradedHeader = httplimit.WithDegradedHeader
	WithDenyStatus     = httplimit.WithDenyStatus
	WithDenyBody       = httplimit.WithDenyBody
	WithErrorHook      = httplimit.WithErrorHook
	WithClock          = httplimit.WithClock
)

// Config is the engine's reading of a middleware's options. Adapters read
// DenyHandler; everything else is for the Engine.
type Config struct {
	primary   keySpec
	extra     []checkSpec
	scope     *string
	scopeFunc func(keyfuncs.Request) string
	skip      func(keyfuncs.Request) bool
	cost      func(keyfuncs.Request) int64
	noKey     NoKeyMode
	fallback  keySpec
	headers   HeaderSet
	reset     ResetFormat
	degraded  string
	status    int
	bodyType  string
	body      []byte
	bodySet   bool
	onError   func(ctx context.Context, err error)
	clock     core.Clock
	pol       mwconf.Policies
	// DenyHandler is the adapter-specific custom denial handler, or nil.
	DenyHandler any
	// Route is the adapter-specific route resolver (nethttp.WithRoute),
	// or nil.
	Route any
	// InFlight is the counter the adapter keeps around the request
	// (httplimit.WithInFlight), or nil: adapters then build their plain
	// handler, which pays nothing for it.
	InFlight *core.InFlight
}

type keySpec struct {
	fn  keyfuncs.Func
	ip  *keyfuncs.Resolver
	set bool
}

type checkSpec struct {
	lim *core.Limiter
	key keySpec
}

// newConfig applies opts over the defaults (every header of
// HeaderDefault, status 429) and returns the first mistake, prefixed by
// pkg.
func newConfig(pkg string, opts []Option) (*Config, error) {
	hc := new(httplimit.Config)
	s := mwconf.Of(hc)
	s.Headers = uint8(HeaderDefault)
	s.Status = http.StatusTooManyRequests
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%s: nil Option", pkg)
		}
		o(hc)
	}
	if len(s.Errs) > 0 {
		return nil, fmt.Errorf("%s: %w", pkg, s.Errs[0])
	}
	key := func(k mwconf.KeySpec) keySpec { return keySpec{fn: k.Fn, ip: k.IP, set: k.Set} }
	cfg := &Config{
		primary:     key(s.Primary),
		scope:       s.Scope,
		scopeFunc:   s.ScopeFunc,
		skip:        s.Skip,
		cost:        s.Cost,
		noKey:       NoKeyMode(s.NoKey),
		fallback:    key(s.Fallback),
		headers:     HeaderSet(s.Headers),
		reset:       ResetFormat(s.Reset),
		degraded:    s.Degraded,
		status:      s.Status,
		bodyType:    s.BodyType,
		body:        s.Body,
		bodySet:     s.BodySet,
		onError:     s.OnError,
		clock:       s.Clock,
		DenyHandler: s.DenyHandler,
		InFlight:    s.InFlight,
		pol:         s.Policies,
		Route:       s.Route,
	}
	for _, c := range s.Extra {
		cfg.extra = append(cfg.extra, checkSpec{lim: c.Lim, key: key(c.Key)})
	}
	return cfg, nil
}

// SetDenyHandler is used by adapters' WithDenyHandler: h must not be nil.
func SetDenyHandler(h any, isNil bool) Option {
	return func(c *httplimit.Config) {
		s := mwconf.Of(c)
		if isNil {
			s.Errs = append(s.Errs, errors.New("WithDenyHandler(nil): pass a handler, or leave the option out for the default denial"))
			return
		}
		s.DenyHandler = h
	}
}

var errNoLimiter = errors.New("nil *core.Limiter: build one with core.NewLimiter(memstore.New(), policy)")
