package httplimit

import (
	"context"
	"net/http"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
)

// WithKey sets the key function of the limiter passed to New. Without it
// (and without [WithIPKey]) requests are keyed by keyfuncs.PeerIP(): the
// TCP peer address, IPv4 /32 and IPv6 /64, reading no header — never the
// framework's client-IP helper, which trusts spoofable headers. Behind a
// proxy, pass a trusted-proxy resolver (keyfuncs.XForwardedFor(cidrs...))
// to [WithIPKey], or its Key method here. A key function that returns
// keyfuncs.ErrNoKey or "" gets the fallback key ([WithFallbackKey]), or
// what [WithNoKeySkip] or [WithNoKeyDeny] says; keys longer than 256 bytes
// are hashed (keyfuncs.Bound). A *keyfuncs.Refusal (keyfuncs.FormField's
// for a body it cannot read as the handler would) refuses the request
// with its status ([ReasonRefused]), never keyed by the fallback. With
// [WithIdentity], the key of an admitted request reaches its handler as
// [Identity].
func WithKey(f keyfuncs.Func) Option {
	return func(c *config) {
		if f == nil {
			c.fail("WithKey(nil): pass a keyfuncs.Func, or leave WithKey out to key by the peer IP")
			return
		}
		c.primary = keySpec{fn: f, set: true}
	}
}

// WithIdentity hands the identity an admitted request was charged under
// (the client key of [WithKey]'s function, [Result.Identity]) to the
// handler: the adapters put it on the request ([Identity]; fiberlimit:
// its Locals) before calling it. A handler that must act on exactly the
// identity that was counted needs it — a login handler checking the
// password of the username keyfuncs.FormField charged, not of one it
// parses again (rules' form keys set it). Without it (the default)
// [Result.Identity] and [Identity] report false, and an admitted request
// costs no allocation for it (net/http: two, a context and a request
// copy). It has no effect with an IP key ([WithIPKey], the default).
func WithIdentity() Option {
	return func(c *config) { c.identity = true }
}

// WithIPKey keys the limiter passed to New by an IP resolver
// (keyfuncs.PeerIP(), keyfuncs.XForwardedFor(...), ...). It is equivalent
// to WithKey(r.Key) but renders the address without allocating.
func WithIPKey(r *keyfuncs.Resolver) Option {
	return func(c *config) {
		if r == nil {
			c.fail("WithIPKey(nil): pass a resolver such as keyfuncs.PeerIP()")
			return
		}
		c.primary = keySpec{ip: r, set: true}
	}
}

// WithCheck adds a check to the middleware: l applied to the key that key
// returns (nil key: the peer IP). A request is admitted only when every
// check admits it (core.AllowAll: checks run in order, New's limiter first,
// and stop at the first denial, so later checks consume nothing); the
// headers describe the binding check. This is the hybrid "limit the user
// and the IP": New(userLimiter, WithKey(userKey), WithNoKeySkip(),
// WithCheck(ipLimiter, nil)). At most 8 checks.
func WithCheck(l *core.Limiter, key keyfuncs.Func) Option {
	return func(c *config) {
		if l == nil {
			c.fail("WithCheck(nil, ...): pass a *core.Limiter")
			return
		}
		c.extra = append(c.extra, checkSpec{lim: l, key: keySpec{fn: key, set: key != nil}})
	}
}

// WithScope replaces the default key namespace with a fixed one. By
// default every store key is "<METHOD> <route pattern>|<client key>" (e.g.
// "GET /users/:id|203.0.113.7"; net/http patterns that name their method
// are used as is; a route that serves every method — a net/http pattern
// without one, gin's r.Any, echo's e.Any, fiber's app.All — is the route
// alone, one quota whatever the method; HEAD counts as GET), so that each
// endpoint has its own quota per client
// even under one global middleware, and "/users/1" and "/users/2" share
// one; requests that reach no route share the empty scope.
// WithScope("") makes every route the middleware covers share one quota
// per client; WithScope("uploads") on several routes makes them share a
// named quota. Stores further separate keys by policy.
func WithScope(scope string) Option {
	return func(c *config) { c.scope = &scope; c.scopeFunc = nil }
}

// WithScopeFunc computes the key namespace per request, e.g. from a
// router the adapter does not know (chi: read chi.RouteContext via
// r.Value(chi.RouteCtxKey) in a per-route middleware). The result must
// have bounded cardinality: never return the raw path.
func WithScopeFunc(f func(r keyfuncs.Request) string) Option {
	return func(c *config) {
		if f == nil {
			c.fail("WithScopeFunc(nil): pass a function, or use WithScope")
			return
		}
		c.scopeFunc = f
		c.scope = nil
	}
}

// WithSkip exempts requests for which f returns true (health checks,
// internal callers): they are not counted and get no rate-limit headers.
// f must be fast and must not retain r. A nil f exempts nothing.
func WithSkip(f func(r keyfuncs.Request) bool) Option {
	return func(c *config) { c.skip = f }
}

// WithCost charges f(r) units per request instead of 1 (weighted
// requests); values below 1 count as 1 (use [WithSkip] to exempt). A nil
// f charges 1.
func WithCost(f func(r keyfuncs.Request) int64) Option {
	return func(c *config) { c.cost = f }
}

// WithFallbackKey, [WithNoKeySkip] and [WithNoKeyDeny] say what a
// middleware does when a check's key function finds no key
// (keyfuncs.ErrNoKey) or invalid key material (any other error, which is
// also reported to the [WithErrorHook] hook); the last of the three given
// wins. A *keyfuncs.Refusal is none of these: it is always refused
// ([ReasonRefused]).
//
// WithFallbackKey keys such a check by f (by default, without this
// option, keyfuncs.PeerIP().Key: the peer IP), prefixed "~fb/" so that it
// never shares quota with a primary key that looks the same; if f finds
// no key either, the request is denied (ReasonNoKey, 403) and the
// [WithErrorHook] hook is told. The fallback is the default: a request is
// never let through unlimited by accident.
//
// With the default key (the peer IP) a primary key always exists unless
// the peer address is not an IP: a server listening on a Unix socket
// (behind a local proxy) denies every request with 403. There, key by
// what the proxy passes on — e.g. [WithKey] with keyfuncs.Header on a
// header the proxy overwrites on every request, safe only when nothing
// but the proxy can reach the socket — or choose [WithNoKeySkip] to leave
// such requests unlimited.
func WithFallbackKey(f keyfuncs.Func) Option {
	return func(c *config) {
		if f == nil {
			c.fail("WithFallbackKey(nil): pass a keyfuncs.Func")
			return
		}
		c.noKey = noKeyFallback
		c.fallback = keySpec{fn: f, set: true}
	}
}

// WithNoKeySkip skips a check whose key function finds no key, for that
// request; other checks still apply. Use it for the user check of a
// user+IP hybrid, so anonymous requests are limited by the IP check alone
// (see [WithFallbackKey] for the default).
func WithNoKeySkip() Option {
	return func(c *config) { c.noKey = noKeySkip }
}

// WithNoKeyDeny denies a request for which a check's key function finds
// no key (ReasonNoKey: 403, no rate-limit fields, no Retry-After; see
// [WithFallbackKey] for the default).
func WithNoKeyDeny() Option {
	return func(c *config) { c.noKey = noKeyDeny }
}

// WithHeaders selects the header fields written (default
// [HeaderDefault]); [HeaderNone] turns them all off.
func WithHeaders(h HeaderSet) Option {
	return func(c *config) {
		if h&^headerAll != 0 {
			c.fail("WithHeaders(%d): combine HeaderXRateLimit, HeaderRetryAfter and HeaderIETF", h)
			return
		}
		c.headers = h
	}
}

// WithResetDelta writes X-RateLimit-Reset as delta seconds (rounded
// up) until the binding limit's quota is full again, like Retry-After and
// the IETF t parameter: immune to clock skew between client and server.
// Without it the field is Unix epoch seconds (rounded up) of that moment:
// the GitHub/GitLab/Twitter convention that most X-RateLimit-* clients
// parse, which relies on the client's clock agreeing with the server's.
func WithResetDelta() Option {
	return func(c *config) { c.resetDelta = true }
}

// WithDegradedHeader sets the named header to "1" on requests admitted
// only because a FailOpen policy's store failed (none by default; "" turns
// it off).
func WithDegradedHeader(name string) Option {
	return func(c *config) {
		if name != "" && !validHeaderName(name) {
			c.fail("WithDegradedHeader(%q): not a valid header name", name)
			return
		}
		c.degraded = http.CanonicalHeaderKey(name)
	}
}

// WithDenyStatus sets the status of quota denials (default 429 Too Many
// Requests); it must be 4xx or 5xx. Store failures under FailClosed always
// answer 503, and no-key denials ([ReasonNoKey]) 403.
func WithDenyStatus(code int) Option {
	return func(c *config) {
		if code < 400 || code > 599 {
			c.fail("WithDenyStatus(%d): use a 4xx or 5xx status (429 is the standard)", code)
			return
		}
		c.status = code
		c.httpOnly = append(c.httpOnly, "WithDenyStatus")
	}
}

// WithDenyBody replaces the default denial body — an RFC 9457
// application/problem+json object of the IETF draft's quota-exceeded type:
// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
// "title":"Request cannot be satisfied as assigned quota has been exceeded",
// "status":429,"violated-policies":["api"]} — for quota denials. No-key
// and store-failure denials keep their own bodies. body is copied.
func WithDenyBody(contentType string, body []byte) Option {
	return func(c *config) {
		c.bodyType = contentType
		c.body = append([]byte(nil), body...)
		c.bodySet = true
		c.httpOnly = append(c.httpOnly, "WithDenyBody")
	}
}

// WithErrorHook reports errors the client never sees: store failures
// (*core.StoreError, whatever the fail mode), invalid key material from a
// key function, and requests denied because not even the fallback key
// exists (wrapping keyfuncs.ErrNoKey: a server on a Unix socket). ctx is
// the request's context. f runs on the request path, possibly from many
// goroutines at once: keep it fast (log, count).
func WithErrorHook(f func(ctx context.Context, err error)) Option {
	return func(c *config) { c.onError = f }
}

// WithClock sets the clock from which epoch X-RateLimit-Reset values are
// computed. Default: the limiter's own clock, read once per request for
// both the decision and the header.
func WithClock(clk core.Clock) Option {
	return func(c *config) {
		if clk == nil {
			c.fail("WithClock(nil): pass a core.Clock")
			return
		}
		c.clock = clk
	}
}

// WithInFlight makes the middleware count the requests it is handling in
// f: Enter before the decision, Exit when the rest of the chain (the
// handler, and the middlewares after this one) has returned, for every
// request, admitted or denied. It is the load that core.LoadBelow, the
// in-process capacity signal of elastic throttling, compares with its
// threshold: pass the same counter to both (rules.SignalEnv.InFlight for
// rules files). Attach it to one middleware per request path (the
// outermost), or a request is counted once per middleware. Without it
// the middleware counts nothing and pays nothing for it. f must not be
// nil.
func WithInFlight(f *core.InFlight) Option {
	return func(c *config) {
		if f == nil {
			c.fail("WithInFlight(nil): pass a *core.InFlight (the one the load signal reads)")
			return
		}
		c.inFlight = f
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
