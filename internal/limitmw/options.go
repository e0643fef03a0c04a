package limitmw

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Option configures a middleware. Every adapter re-exports it (type alias)
// together with thin wrappers of the constructors below, under the same
// names.
type Option func(*Config)

// Config is what the options build. Adapters read DenyHandler; everything
// else is for the Engine.
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
	headerSet bool
	reset     ResetFormat
	degraded  string
	status    int
	bodyType  string
	body      []byte
	bodySet   bool
	onError   func(context.Context, error)
	clock     core.Clock
	// DenyHandler is the adapter-specific custom denial handler, or nil.
	DenyHandler any
	errs        []error
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

// HeaderSet selects the header fields written on allowed and denied
// responses.
type HeaderSet uint8

const (
	// HeaderXRateLimit is X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset, on allowed and denied responses. Default on.
	HeaderXRateLimit HeaderSet = 1 << iota
	// HeaderRetryAfter is Retry-After on 429 and 503 responses. Default on.
	HeaderRetryAfter
	// HeaderIETF is RateLimit-Policy and RateLimit of
	// draft-ietf-httpapi-ratelimit-headers-10. Default off.
	HeaderIETF

	// HeaderNone writes no rate-limit header at all.
	HeaderNone HeaderSet = 0
	// HeaderDefault is what a middleware writes unless told otherwise.
	HeaderDefault = HeaderXRateLimit | HeaderRetryAfter
	headerAll     = HeaderXRateLimit | HeaderRetryAfter | HeaderIETF
)

// ResetFormat says how X-RateLimit-Reset is written.
type ResetFormat uint8

const (
	// ResetEpoch writes the Unix time in seconds (rounded up) at which the
	// binding limit's quota is full again: the GitHub/Twitter/GitLab
	// convention most X-RateLimit-* clients parse. The default.
	ResetEpoch ResetFormat = iota
	// ResetDelta writes the seconds (rounded up) until then, like
	// Retry-After and the IETF t parameter: immune to client clock skew.
	ResetDelta
)

// NoKeyMode says what a middleware does with a request for which a check's
// key function yields no key (keyfuncs.ErrNoKey) or invalid key material.
type NoKeyMode uint8

const (
	// NoKeyFallback keys the check by the fallback key function (the peer
	// IP by default) under a distinct "~fb/" prefix; if that yields no key
	// either (a Unix-socket peer), the request is denied as with NoKeyDeny
	// and the error hook is told. The default.
	NoKeyFallback NoKeyMode = iota
	// NoKeySkip skips that check: the request is not limited by it (other
	// checks still apply). Right for a user check in a user+IP hybrid.
	NoKeySkip
	// NoKeyDeny denies the request: ReasonNoKey, 403 with
	// respond.NoKeyBody, no Retry-After and no X-RateLimit-* fields
	// (nothing was counted; WithDenyStatus and WithDenyBody do not apply).
	NoKeyDeny
)

func (c *Config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// WithKey sets the key function of the limiter given to New.
func WithKey(f keyfuncs.Func) Option {
	return func(c *Config) {
		if f == nil {
			c.fail("WithKey(nil): pass a keyfuncs.Func, or leave WithKey out to key by the peer IP")
			return
		}
		c.primary = keySpec{fn: f, set: true}
	}
}

// WithIPKey keys the limiter given to New by an IP resolver.
func WithIPKey(r *keyfuncs.Resolver) Option {
	return func(c *Config) {
		if r == nil {
			c.fail("WithIPKey(nil): pass a resolver such as keyfuncs.PeerIP()")
			return
		}
		c.primary = keySpec{ip: r, set: true}
	}
}

// WithCheck adds a check: l applied to the key key returns.
func WithCheck(l *core.Limiter, key keyfuncs.Func) Option {
	return func(c *Config) {
		if l == nil {
			c.fail("WithCheck(nil, ...): pass a *core.Limiter")
			return
		}
		ks := keySpec{fn: key, set: key != nil}
		c.extra = append(c.extra, checkSpec{lim: l, key: ks})
	}
}

// WithScope sets a fixed key namespace.
func WithScope(scope string) Option {
	return func(c *Config) { c.scope = &scope; c.scopeFunc = nil }
}

// WithScopeFunc computes the key namespace per request.
func WithScopeFunc(f func(keyfuncs.Request) string) Option {
	return func(c *Config) {
		if f == nil {
			c.fail("WithScopeFunc(nil): pass a function, or use WithScope")
			return
		}
		c.scopeFunc = f
		c.scope = nil
	}
}

// WithSkip exempts requests for which f returns true.
func WithSkip(f func(keyfuncs.Request) bool) Option {
	return func(c *Config) { c.skip = f }
}

// WithCost charges f(request) per request instead of 1.
func WithCost(f func(keyfuncs.Request) int64) Option {
	return func(c *Config) { c.cost = f }
}

// WithNoKey sets the no-key behaviour.
func WithNoKey(m NoKeyMode) Option {
	return func(c *Config) {
		if m > NoKeyDeny {
			c.fail("WithNoKey(%d): use NoKeyFallback, NoKeySkip or NoKeyDeny", m)
			return
		}
		c.noKey = m
	}
}

// WithFallbackKey sets NoKeyFallback with f as the fallback key function.
func WithFallbackKey(f keyfuncs.Func) Option {
	return func(c *Config) {
		if f == nil {
			c.fail("WithFallbackKey(nil): pass a keyfuncs.Func")
			return
		}
		c.noKey = NoKeyFallback
		c.fallback = keySpec{fn: f, set: true}
	}
}

// WithHeaders selects the header fields written.
func WithHeaders(h HeaderSet) Option {
	return func(c *Config) {
		if h&^headerAll != 0 {
			c.fail("WithHeaders(%d): combine HeaderXRateLimit, HeaderRetryAfter and HeaderIETF", h)
			return
		}
		c.headers, c.headerSet = h, true
	}
}

// WithResetFormat selects epoch or delta seconds for X-RateLimit-Reset.
func WithResetFormat(f ResetFormat) Option {
	return func(c *Config) {
		if f > ResetDelta {
			c.fail("WithResetFormat(%d): use ResetEpoch or ResetDelta", f)
			return
		}
		c.reset = f
	}
}

// WithDegradedHeader names a header set to "1" on requests admitted because
// a FailOpen store failed.
func WithDegradedHeader(name string) Option {
	return func(c *Config) {
		if name != "" && !validHeaderName(name) {
			c.fail("WithDegradedHeader(%q): not a valid header name", name)
			return
		}
		c.degraded = http.CanonicalHeaderKey(name)
	}
}

// WithDenyStatus sets the status of quota denials (default 429); no-key
// and store-failure denials keep theirs (403, 503).
func WithDenyStatus(code int) Option {
	return func(c *Config) {
		if code < 400 || code > 599 {
			c.fail("WithDenyStatus(%d): use a 4xx or 5xx status (429 is the standard)", code)
			return
		}
		c.status = code
	}
}

// WithDenyBody replaces the default body of quota denials.
func WithDenyBody(contentType string, body []byte) Option {
	return func(c *Config) {
		c.bodyType = contentType
		c.body = append([]byte(nil), body...)
		c.bodySet = true
	}
}

// WithErrorHook reports store and key-function errors.
func WithErrorHook(f func(ctx context.Context, err error)) Option {
	return func(c *Config) { c.onError = f }
}

// WithClock sets the clock of X-RateLimit-Reset epoch values (default: the
// limiter's clock, read once per request for the decision and the header).
func WithClock(clk core.Clock) Option {
	return func(c *Config) {
		if clk == nil {
			c.fail("WithClock(nil): pass a core.Clock")
			return
		}
		c.clock = clk
	}
}

// SetDenyHandler is used by adapters' WithDenyHandler: h must not be nil.
func SetDenyHandler(h any, isNil bool) Option {
	return func(c *Config) {
		if isNil {
			c.fail("WithDenyHandler(nil): pass a handler, or leave the option out for the default denial")
			return
		}
		c.DenyHandler = h
	}
}

func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			return false
		}
	}
	return true
}

var errNoLimiter = errors.New("nil *core.Limiter: build one with core.NewLimiter(memstore.New(), policy)")
