package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unsafe"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/hostport"
	"github.com/limitkit/limitkit/internal/respond"
	"github.com/limitkit/limitkit/keyfuncs"
)

// MaxChecks bounds the checks of one middleware.
const MaxChecks = 8

// maxKeyLen is the longest key-function result used verbatim; longer ones
// are hashed with keyfuncs.Bound.
const maxKeyLen = 256

// keySep separates the scope from the client key in a store key.
const keySep = '|'

// fallbackPrefix marks keys produced by the fallback key function, so that
// a fallback IP key never shares quota with an identical-looking primary key
// (an API key "203.0.113.7"). '~' followed by a non-hex byte is disjoint
// from keyfuncs.Bound's "~<hex>" digests.
const fallbackPrefix = "~fb/"

// Action is what the adapter does with a request.
type Action uint8

const (
	// Pass: write the headers and call the next handler.
	Pass Action = iota
	// Deny: write the headers and the denial.
	Deny
	// Skip: exempt by the skip hook; call the next handler, write nothing.
	Skip
)

// Result is the engine's verdict on one request.
type Result struct {
	// Action is what to do.
	Action Action
	// Reason is set when Action is Deny.
	Reason Reason
	// Decision is the binding decision, when a check ran.
	Decision core.Decision
	// Degraded is true when a FailOpen store failed and the request passed.
	Degraded bool
	decided  bool
	now      time.Time // when the decision was taken, for epoch headers; zero: read the clock
	chk      *check    // the primary check's tier or override (policies_engine.go), nil for checks[0]
	out      *outcome  // what to charge once the response is known (policies_engine.go)
}

type check struct {
	lim    *core.Limiter
	direct core.DirectStore // lim.DirectStore(): a TakeTo of it is lim's answer
	key    keySpec
	policy *core.Policy
	ids    []string
	body   []byte
	pf     string // the RateLimit-Policy field when this is a tier's check (policies_engine.go)
}

// Engine is the framework-neutral middleware every adapter runs: built
// once by [NewEngine] from a limiter and the options, it derives each
// request's store keys, decides, and says what to write. Adapters supply
// a keyfuncs.Request view of their framework's request and write what
// the engine decides; they hold no limiting logic. An Engine is immutable
// after NewEngine and safe for concurrent use; the zero value is not
// usable.
type Engine struct {
	pkg         string
	checks      []check
	scope       string
	scopeFixed  bool
	ownClock    bool // clock is the primary limiter's: one read serves the decision and the headers
	coarse      bool // clock is core.CoarseClock: called directly, not through the interface
	policyField string
	unavailable []byte
	noKeyBody   []byte
	peer        *keyfuncs.Resolver // the default key: keys by it take the IPv4 fast path
	cacheID     uint64             // the engine's key-cache id, 0 when its keys are not cached (see keycache.go)
	limitText   []limitText        // every check's limit sizes, formatted once
	pol         *policies          // tiers, overrides, counting by outcome (policies_engine.go); nil for none
	cfg         Config             // the options, with defaults filled in: the fallback key, the clock
}

// limitText is a limit size, its decimal form and that as a header
// value shared by every response (respond.Values).
type limitText struct {
	n    int64
	s    string
	vals []string
}

func newLimitText(n int64) limitText {
	s := respond.Itoa(n)
	return limitText{n, s, respond.Values(s)}
}

// NewEngine validates the options and builds the Engine applying lim
// (and any [WithCheck] limiters). adapter names the adapter: it prefixes
// every error ("ginlimit: WithKey(nil): ..."). It is
// NewAdapterEngine(Adapter{Name: adapter}, lim, opts...): an HTTP adapter
// that reads no [AdapterOption] and does not report outcomes, so that
// every adapter option and [WithOutcome] are rejected; an adapter that
// reads either describes itself to [NewAdapterEngine]. The first mistake
// is returned; nothing is built then.
func NewEngine(adapter string, lim *core.Limiter, opts ...Option) (*Engine, error) {
	return newEngine(&Adapter{Name: adapter}, lim, opts)
}

// newEngine is NewAdapterEngine.
func newEngine(a *Adapter, lim *core.Limiter, opts []Option) (*Engine, error) {
	pkg := a.Name
	if lim == nil {
		return nil, fmt.Errorf("%s: New: %w", pkg, errNoLimiter)
	}
	cfg, err := newConfig(a, opts)
	if err != nil {
		return nil, err
	}
	ownClock := cfg.clock == nil
	if ownClock {
		cfg.clock = lim.Clock() // epoch resets follow the limiter's clock
	}
	if 1+len(cfg.extra) > MaxChecks {
		return nil, fmt.Errorf("%s: %d checks, at most %d", pkg, 1+len(cfg.extra), MaxChecks)
	}
	peer := keyfuncs.PeerIP()
	defKey := func(k keySpec) keySpec {
		if !k.set {
			return keySpec{ip: peer, set: true}
		}
		return k
	}
	cfg.fallback = defKey(cfg.fallback)
	e := &Engine{
		cfg:         *cfg,
		pkg:         pkg,
		ownClock:    ownClock,
		coarse:      cfg.clock == core.Clock(core.CoarseClock{}),
		unavailable: respond.UnavailableBody(),
		noKeyBody:   respond.NoKeyBody(),
		peer:        peer,
	}
	if cfg.scope != nil {
		e.scope, e.scopeFixed = *cfg.scope, true
	}
	specs := append([]checkSpec{{lim: lim, key: cfg.primary}}, cfg.extra...)
	var pf []byte
	seen := map[string]bool{}
	for _, s := range specs {
		p := s.lim.Policy()
		c := check{lim: s.lim, key: defKey(s.key), policy: p, ids: respond.LimitIDs(p), body: respond.QuotaExceededBody(e.cfg.status, p.Name)}
		c.direct = s.lim.DirectStore()
		e.checks = append(e.checks, c)
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		for i, l := range p.Limits {
			e.limitText = append(e.limitText, newLimitText(l.Requests))
			if len(pf) > 0 {
				pf = append(pf, ", "...)
			}
			pf = respond.AppendPolicyItem(pf, c.ids[i], l)
		}
	}
	e.policyField = string(pf)
	if err := e.initPolicies(&cfg.pol); err != nil {
		return nil, err
	}
	if len(e.checks) == 1 && e.cfg.scopeFunc == nil && e.checks[0].key.ip == peer && e.pol == nil {
		// the store key is a function of the method, the route and the peer
		e.cacheID = engineIDs.Add(1)
	}
	return e, nil
}

// Clock returns the engine's clock: [WithClock]'s, else the primary
// limiter's.
func (e *Engine) Clock() core.Clock { return e.cfg.clock }

// InFlight returns the [WithInFlight] counter, or nil. The adapter calls
// its Enter before DecideInto and its Exit when the rest of the chain has
// returned, for every request; with nil it counts nothing (and should
// build a handler that pays nothing for it).
func (e *Engine) InFlight() *core.InFlight { return e.cfg.inFlight }

// AdapterValue returns the value of the [AdapterOption] named name given
// to this engine (the last one, when given twice), or nil when none was.
// The engine has already rejected adapter options of other adapters, and
// names and types its [Adapter] does not declare; [AdapterOptionValue]
// is the typed form.
func (e *Engine) AdapterValue(name string) any {
	for _, a := range e.cfg.adapter {
		if a.name == name {
			return a.v
		}
	}
	return nil
}

type keyStatus uint8

const (
	keyOK keyStatus = iota
	keySkip
	keyDeny
)

// Decide runs the skip hook, derives each check's key, and decides.
// ctx is the request's context (the store deadline derives from it).
func (e *Engine) Decide(ctx context.Context, req keyfuncs.Request) Result {
	var r Result
	e.DecideInto(ctx, req, &r)
	return r
}

// DecideInto is Decide writing the result into *res, which must be the
// zero Result (a fresh variable; the fields a decision leaves unset are
// not cleared again): adapters keep the Result on their stack and nothing
// copies or clears it twice.
func (e *Engine) DecideInto(ctx context.Context, req keyfuncs.Request, res *Result) {
	e.decide(ctx, req, nil, res)
}

// PartsKeyed reports whether the engine's store key is a function of a
// request's [KeyParts] (one check, the default peer-IP key, the default
// or a fixed scope, no skip or cost function, no tiers, overrides or
// counting by outcome), so that [Engine.DecidePartsInto] can decide, and
// whether those parts include the route (the argument of
// [KeyParter.KeyParts]; false under WithScope). An adapter whose request
// view costs something to build (an allocation, a pool) asks once, at
// construction.
func (e *Engine) PartsKeyed() (ok, route bool) {
	return e.cacheID != 0 && e.cfg.skip == nil && e.cfg.cost == nil, !e.scopeFixed
}

// DecidePartsInto decides the request whose KeyParts are p as
// DecideInto(ctx, req, res) would, and reports whether it did: from the
// key cache when it knows p (a client that asked the route recently),
// else on the general path with req, the request's view (whose key is
// then cached under p). With req nil a cache miss decides nothing: *res
// is left as it was and the adapter calls DecideInto with a view (an
// adapter whose view costs something to build builds it only then). p
// must be the parts the engine would read from req, route as
// [Engine.PartsKeyed] said: what its [KeyParter] returns with ok (for
// net/http's keyfuncs.HTTPRequest: Peer its RemoteAddr, Route its
// pattern, StableRoute). On an engine that is not PartsKeyed it reports
// false. *res must be the zero Result, as for DecideInto. The
// adapter calls the view's KeyParts directly (no interface), and the
// engine hashes the parts once.
func (e *Engine) DecidePartsInto(ctx context.Context, p *KeyParts, req keyfuncs.Request, res *Result) bool {
	return e.decide(ctx, req, p, res)
}

// decide is DecideInto for req or, when p is not nil, DecidePartsInto
// for p and req (which takes only the one check's branch, and reports
// false on an engine that is not PartsKeyed), in one function: a
// decision on the common path is a single call from the adapter.
func (e *Engine) decide(ctx context.Context, req keyfuncs.Request, p *KeyParts, res *Result) bool {
	cost := int64(1)
	if e.cfg.skip != nil || e.cfg.cost != nil {
		if p != nil {
			return false
		}
		if e.cfg.skip != nil && e.cfg.skip(req) {
			res.Action = Skip
			return true
		}
		if e.cfg.cost != nil {
			if c := e.cfg.cost(req); c > 1 {
				cost = c
			}
		}
	}
	if len(e.checks) > 1 || e.pol != nil {
		if p != nil {
			return false
		}
		e.decideAll(ctx, req, res, cost)
		return true
	}
	c := &e.checks[0]
	var key string
	st := keyOK
	switch {
	case p != nil && e.cacheID == 0:
		return false
	case p != nil:
		var slot slotRef
		if key, slot = keys.get(e.cacheID, p); key == "" {
			if req == nil {
				return false
			}
			key, st = e.missedKey(ctx, c, req, p, slot)
		}
	case e.cacheID != 0:
		key, st = e.cachedKey(ctx, c, req)
	default:
		key, st, _ = e.generalKey(ctx, c, req)
	}
	if st != keyOK {
		e.noKeyResult(res, c, st)
		return true
	}
	var err error
	if e.ownClock {
		if e.coarse {
			res.now = core.CoarseClock{}.Now()
		} else {
			res.now = e.cfg.clock.Now()
		}
		if c.direct == nil {
			res.Decision, err = c.lim.AllowNAt(ctx, key, res.now, cost)
		} else if err = c.direct.TakeTo(key, c.policy, res.now, cost, unseen(&res.Decision)); err != nil {
			// the store is closed or refused the policy and consumed
			// nothing: the Limiter applies the fail mode and logs
			res.Decision, err = c.lim.AllowNAt(ctx, key, res.now, cost)
		}
	} else {
		res.Decision, err = c.lim.AllowN(ctx, key, cost)
	}
	if err == nil && res.Decision.Allowed { // finish's common case, without the call
		res.decided, res.Action = true, Pass
		return true
	}
	e.finish(ctx, res, err)
	return true
}

// decideAll decides every check, each key built after the scope in one
// buffer, or the tiers, overrides and counting by outcome.
func (e *Engine) decideAll(ctx context.Context, req keyfuncs.Request, res *Result, cost int64) {
	if e.pol != nil {
		e.decidePolicies(ctx, req, res, cost)
		return
	}
	var kbuf [192]byte
	scope := e.appendScope(kbuf[:0], req)
	var cbuf [MaxChecks]core.Check
	list := cbuf[:0]
	for i := range e.checks {
		c := &e.checks[i]
		key, st, _ := e.key(ctx, c, req, scope)
		switch st {
		case keySkip:
			continue
		case keyDeny:
			e.noKeyResult(res, c, st)
			return
		}
		list = append(list, core.Check{Limiter: c.lim, Key: key, Cost: cost})
	}
	if len(list) == 0 {
		res.Action = Pass
		return
	}
	var err error
	res.Decision, err = core.AllowAll(ctx, list...)
	e.finish(ctx, res, err)
}

func (e *Engine) noKeyResult(res *Result, c *check, st keyStatus) {
	if st == keySkip {
		res.Action = Pass
		return
	}
	res.Action, res.Reason = Deny, ReasonNoKey
	res.Decision = core.Decision{Policy: c.policy.Name, RetryAfter: core.Never}
}

// finish sets the action of the decision in res.Decision.
func (e *Engine) finish(ctx context.Context, res *Result, err error) {
	if err != nil {
		e.report(ctx, err)
	}
	res.decided = true
	switch d := &res.Decision; {
	case d.Allowed:
		res.Action = Pass
		res.Degraded = err != nil
	case d.Degraded && d.Limit.Requests == 0:
		// a fail mode denied: no limit was consulted (503)
		res.Action, res.Reason = Deny, ReasonUnavailable
	default:
		res.Action, res.Reason = Deny, ReasonLimited
	}
}

func (e *Engine) report(ctx context.Context, err error) {
	if e.cfg.onError != nil {
		e.cfg.onError(ctx, err)
	}
}

// appendScope appends the key namespace: the fixed scope, the scope
// function's result, or by default "METHOD route" ("GET /users/:id"). A
// route that already names its method or a host (net/http's
// "GET /users/{id}", "example.com/x") is used as is; a route that accepts
// every method (see [ScopeMethod]) is the route alone ("/api2"); another
// route starting with "/" gets the method prepended; an unknown route ("")
// gives the empty scope.
func (e *Engine) appendScope(b []byte, req keyfuncs.Request) []byte {
	if e.scopeFixed {
		return append(b, e.scope...)
	}
	if e.cfg.scopeFunc != nil {
		return append(b, e.cfg.scopeFunc(req)...)
	}
	route := req.Route()
	if route == "" {
		return b
	}
	if strings.IndexByte(route, ' ') >= 0 || route[0] != '/' {
		return append(b, route...)
	}
	if m := ScopeMethod(req); m != "" {
		b = append(b, m...)
		b = append(b, ' ')
	}
	return append(b, route...)
}

// AnyMethodRouter is implemented by request views that know whether the
// route the request matched accepts every method: gin's r.Any, echo's
// e.Any and fiber's app.All register one path under every method, and
// such a route has one quota per client, whatever the method.
type AnyMethodRouter interface {
	// AnyMethod reports whether the matched route is registered under
	// every method the framework's "any" registration uses.
	AnyMethod() bool
}

// ScopeMethod is the method part of req's default scope, for a route
// that does not name its method itself: "" when the route accepts every
// method (a net/http ServeMux pattern without a method, whose handler
// serves them all, or a view's [AnyMethodRouter] says so); otherwise the
// request's method, with HEAD as GET (a GET route serves HEAD: net/http
// and fiber route HEAD to it, and a client must not get a second quota by
// asking for headers only) and methods outside RFC 9110 and PATCH as
// "OTHER", so a client inventing methods cannot mint new namespaces.
func ScopeMethod(req keyfuncs.Request) string {
	switch r := req.(type) {
	case keyfuncs.HTTPRequest:
		return ""
	case AnyMethodRouter:
		if r.AnyMethod() {
			return ""
		}
	}
	return NormalMethod(req.Method())
}

// NormalMethod is m as a scope names it: HEAD as GET, m when it is
// another RFC 9110 method or PATCH, else "OTHER".
func NormalMethod(m string) string {
	switch m {
	case http.MethodHead:
		return http.MethodGet
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// DefaultScope is the scope an engine without WithScope or WithScopeFunc
// gives req, as a scope function: a middleware built with
// WithScopeFunc(DefaultScope) keys exactly as the default one but never
// uses the key cache, so tests can compare the two.
func DefaultScope(req keyfuncs.Request) string {
	var e Engine
	var b [128]byte
	return string(e.appendScope(b[:0], req))
}

// cachedKey is key for an engine whose store key is a function of the
// request's KeyParts (see keycache.go): from the key cache when the
// parts were seen recently, else from key, whose result is cached when
// it came from the check's own key function (a fallback key may read
// anything).
func (e *Engine) cachedKey(ctx context.Context, c *check, req keyfuncs.Request) (string, keyStatus) {
	var p KeyParts
	switch r := req.(type) {
	case keyfuncs.HTTPRequest: // net/http's view: a concrete type is one compare
		// no Method: a ServeMux pattern names its method or accepts every
		// one (ScopeMethod), so the scope never depends on the request's
		p.Peer, p.StableRoute = r.RemoteAddr(), true
		if !e.scopeFixed {
			p.Route = r.Route()
		}
	case KeyParter:
		var ok bool
		if p, ok = r.KeyParts(!e.scopeFixed); !ok {
			key, st, _ := e.generalKey(ctx, c, req)
			return key, st
		}
	default:
		p.Peer, p.StableRoute = req.RemoteAddr(), true
		if !e.scopeFixed {
			p.Method, p.Route = ScopeMethod(req), req.Route()
		}
	}
	key, slot := keys.get(e.cacheID, &p)
	if key != "" {
		return key, keyOK
	}
	return e.missedKey(ctx, c, req, &p, slot)
}

// missedKey is the general path's key for req, whose parts p the key
// cache missed at slot: cached under p when it came from the check's own
// key function (a fallback key may read anything).
func (e *Engine) missedKey(ctx context.Context, c *check, req keyfuncs.Request, p *KeyParts, slot slotRef) (string, keyStatus) {
	key, st, own := e.generalKey(ctx, c, req)
	if st == keyOK && own {
		keys.put(slot, e.cacheID, p, key)
	}
	return key, st
}

// generalKey is key after the request's scope, built in a stack buffer:
// the path without the key cache.
func (e *Engine) generalKey(ctx context.Context, c *check, req keyfuncs.Request) (string, keyStatus, bool) {
	var kbuf [192]byte
	return e.key(ctx, c, req, e.appendScope(kbuf[:0], req))
}

// key derives check c's store key: scope, '|', client key. own reports
// that the key came from the check's key function, not the fallback.
func (e *Engine) key(ctx context.Context, c *check, req keyfuncs.Request, scope []byte) (key string, st keyStatus, own bool) {
	// built in place after the scope; interned (copied) before the next
	// check reuses the bytes
	b := scope
	b = append(b, keySep)
	n := len(b)
	if c.key.ip == e.peer && keyfuncs.DefaultIPv4Prefix == 32 {
		if kb, ok := appendPeerIPv4(b, req); ok {
			return interned.intern(kb), keyOK, true
		}
	}
	b, err := appendKey(b, c.key, req)
	if err == nil {
		return interned.intern(b), keyOK, true
	}
	if !errors.Is(err, keyfuncs.ErrNoKey) {
		e.report(ctx, fmt.Errorf("%s: key for policy %q: %w", e.pkg, c.policy.Name, err))
	}
	switch e.cfg.noKey {
	case NoKeySkip:
		return "", keySkip, false
	case NoKeyDeny:
		return "", keyDeny, false
	}
	b = append(b[:n], fallbackPrefix...)
	b, err = appendKey(b, e.cfg.fallback, req)
	if err == nil {
		return interned.intern(b), keyOK, false
	}
	if !errors.Is(err, keyfuncs.ErrNoKey) {
		e.report(ctx, fmt.Errorf("%s: fallback key for policy %q: %w", e.pkg, c.policy.Name, err))
	} else {
		// Not the client's doing when the fallback is the peer IP: the
		// server listens on a Unix socket or the adapter lost the peer.
		// Every such request is denied; say why to the operator.
		e.report(ctx, fmt.Errorf("%s: policy %q: no key, and the fallback key found none either (denied with 403; behind a proxy on a Unix socket, key by a header the proxy sets): %w", e.pkg, c.policy.Name, err))
	}
	return "", keyDeny, false
}

// PeerAddrer is implemented by request views that hold the TCP peer as an
// address (fiberlimit's: fasthttp keeps a net.Addr), so the default key
// needs no text round trip. PeerAddr returns the peer with IPv4-mapped
// IPv6 addresses unmapped, or the zero Addr when the peer is not an IP;
// it must agree with RemoteAddr.
type PeerAddrer interface {
	PeerAddr() netip.Addr
}

// appendPeerIPv4 is the default key (keyfuncs.PeerIP, IPv4 kept whole)
// for the common case, an IPv4 peer, without parsing into a netip.Addr
// and printing it back: it appends the peer's address when RemoteAddr is
// a canonical dotted quad (what net/http and every adapter write), with
// or without a valid port, and reports false for anything else, which
// the general path then decides. The result is byte for byte what
// keyfuncs.PeerIP's Prefix, printed, gives (tested against it).
func appendPeerIPv4(b []byte, req keyfuncs.Request) ([]byte, bool) {
	if pa, ok := req.(PeerAddrer); ok {
		if a := pa.PeerAddr(); a.Is4() {
			return a.AppendTo(b), true
		}
		return b, false
	}
	// one pass: the dotted quad up to the first ':', then the port
	s := req.RemoteAddr()
	dots, digits, n, i := 0, 0, 0, 0
	for ; i < len(s); i++ {
		c := s[i]
		if d := c - '0'; d <= 9 {
			if digits > 0 && n == 0 {
				return b, false // a leading zero: not canonical
			}
			n = n*10 + int(d)
			digits++
			if n > 255 {
				return b, false
			}
			continue
		}
		if c == '.' && digits > 0 {
			dots++
			digits, n = 0, 0
			continue
		}
		if c == ':' {
			break
		}
		return b, false
	}
	if dots != 3 || digits == 0 {
		return b, false
	}
	if i < len(s) && !hostport.ValidPort(s[i+1:]) {
		return b, false
	}
	return append(b, s[:i]...), true
}

var errEmptyKey = fmt.Errorf("%w: the key function returned an empty key", keyfuncs.ErrNoKey)

func appendKey(b []byte, k keySpec, req keyfuncs.Request) ([]byte, error) {
	if k.ip != nil {
		p, err := k.ip.Prefix(req)
		if err != nil {
			return b, err
		}
		if p.IsSingleIP() {
			return p.Addr().AppendTo(b), nil
		}
		return p.AppendTo(b), nil
	}
	s, err := k.fn(req)
	if err != nil {
		return b, err
	}
	if s == "" {
		return b, errEmptyKey
	}
	if len(s) > maxKeyLen {
		s = keyfuncs.Bound(s)
	}
	return append(b, s...), nil
}

// Fields computes the header fields for res into f (which must be
// empty): what [Engine.SetHTTP] writes, for a framework without an
// http.Header.
func (e *Engine) Fields(res *Result, f *Fields) { e.fields(res, &f.f) }

// fields is Fields into the formatter's list, which SetHTTP writes.
func (e *Engine) fields(res *Result, f *respond.Fields) {
	if res.Action == Skip {
		return
	}
	d := &res.Decision
	hasLimit := res.decided && d.Limit.Requests > 0
	if e.cfg.headers&HeaderXRateLimit != 0 && hasLimit {
		if t := e.limitString(d.Limit.Requests); t != "" {
			f.AddStatic(respond.HeaderLimit, t)
		} else {
			f.AddInt(respond.HeaderLimit, d.Limit.Requests)
		}
		f.AddInt(respond.HeaderRemaining, d.Remaining)
		if e.cfg.reset == ResetDelta {
			f.AddInt(respond.HeaderReset, respond.CeilSeconds(d.ResetAfter))
		} else {
			now := res.now
			if now.IsZero() {
				now = e.cfg.clock.Now()
			}
			f.AddEpoch(respond.HeaderReset, respond.EpochSeconds(now, d.ResetAfter), now.Unix())
		}
	}
	retry, hasRetry := int64(0), false
	if res.Action == Deny && res.Reason != ReasonNoKey {
		retry, hasRetry = respond.RetryAfterSeconds(d.RetryAfter)
	}
	if hasRetry && e.cfg.headers&HeaderRetryAfter != 0 {
		f.AddInt(respond.HeaderRetryAfter, retry)
	}
	if e.cfg.headers&HeaderIETF != 0 {
		if res.chk != nil && res.chk.pf != "" {
			f.AddStatic(respond.HeaderPolicy, res.chk.pf)
		} else {
			f.AddStatic(respond.HeaderPolicy, e.policyField)
		}
		if hasLimit {
			t := respond.CeilSeconds(d.ResetAfter)
			if res.Action == Deny {
				t = -1
				if hasRetry {
					t = retry
				}
			}
			f.AddRateLimit(e.limitID(d), d.Remaining, t)
		}
	}
	if res.Degraded && e.cfg.degraded != "" {
		f.AddStatic(e.cfg.degraded, "1")
	}
}

// Triple is the common response's header fields: the X-RateLimit triple
// and nothing else, as Fields would write them. Reset is the reset
// value's text when it is ready-made, else "" and ResetN is to be
// formatted.
type Triple struct {
	Limit     string
	Remaining int64
	Reset     string
	ResetN    int64
}

// Triple writes res's header fields into *t and reports true when they
// are exactly the X-RateLimit triple (a pass with only those headers
// configured and a limit size the engine has text for), so that adapters
// can write them without building Fields; it reports false otherwise,
// leaving *t partly written. t is an out-parameter, not a result: the
// caller reads the fields where Triple stored them, word by word (a
// returned struct is copied in 16-byte moves that stall on the 8-byte
// stores just made, about 7 ns).
func (e *Engine) Triple(res *Result, t *Triple) bool {
	lt := e.tripleLimit(res)
	if lt == nil {
		return false
	}
	d := &res.Decision
	t.Limit, t.Remaining = lt.s, d.Remaining
	if e.cfg.reset == ResetDelta {
		t.Reset, t.ResetN = "", respond.CeilSeconds(d.ResetAfter)
		return true
	}
	now := res.now
	if now.IsZero() {
		now = e.cfg.clock.Now()
	}
	t.ResetN = respond.EpochSeconds(now, d.ResetAfter)
	t.Reset = respond.EpochString(t.ResetN, now.Unix())
	return true
}

// triple is Triple returning the limit's text as e.limitText's entry (nil
// for false), the reset's ready-made text or "" and the reset value, in
// registers: stores through a *Triple would each test the write barrier.
// Its reset lines are Triple's written again: a helper both call does
// not inline (too large), and the call it costs is what fiber's Triple
// paid when it called triple (about 7 ns in MiddlewareCPU/fiber).
func (e *Engine) triple(res *Result) (lt *limitText, reset string, resetN int64) {
	if lt = e.tripleLimit(res); lt == nil {
		return nil, "", 0
	}
	d := &res.Decision
	if e.cfg.reset == ResetDelta {
		return lt, "", respond.CeilSeconds(d.ResetAfter)
	}
	now := res.now
	if now.IsZero() {
		now = e.cfg.clock.Now()
	}
	resetN = respond.EpochSeconds(now, d.ResetAfter)
	return lt, respond.EpochString(resetN, now.Unix()), resetN
}

// tripleLimit is the limit's entry when res's header fields are exactly
// the X-RateLimit triple (see Triple), else nil: the one test Triple and
// triple share. It inlines into both.
func (e *Engine) tripleLimit(res *Result) *limitText {
	d := &res.Decision
	if res.Action != Pass || !res.decided || d.Limit.Requests <= 0 ||
		e.cfg.headers&(HeaderXRateLimit|HeaderIETF) != HeaderXRateLimit || (res.Degraded && e.cfg.degraded != "") {
		return nil
	}
	return e.limitEntry(d.Limit.Requests)
}

// SetHTTP writes the header fields for res into h: what Fields, then
// respond.SetHTTP, write. The common response (see Triple) is written
// without building the Fields, and its values that many responses have
// in common (the limit, a reset instant, a small remaining count) are
// slices shared between responses, of capacity 1: code after the
// middleware replaces such a field (Header.Set, Add, Del), as net/http,
// gin and echo do, and never writes into its slice.
func (e *Engine) SetHTTP(res *Result, h http.Header) {
	if lt, reset, resetN := e.triple(res); lt != nil {
		respond.SetHTTPTriple(h, lt.vals, res.Decision.Remaining, reset, resetN)
		return
	}
	var f respond.Fields
	e.fields(res, &f)
	respond.SetHTTP(h, &f)
}

// limitString is the decimal form of limit size n, formatted at New, or
// "" for a size none of the checks has.
func (e *Engine) limitString(n int64) string {
	if lt := e.limitEntry(n); lt != nil {
		return lt.s
	}
	return ""
}

// limitEntry is limit size n's entry of e.limitText, or nil.
func (e *Engine) limitEntry(n int64) *limitText {
	for i := range e.limitText {
		if e.limitText[i].n == n {
			return &e.limitText[i]
		}
	}
	return nil
}

// limitID is the IETF identifier of d's binding limit.
func (e *Engine) limitID(d *core.Decision) string {
	for i := range e.checks {
		c := &e.checks[i]
		if c.policy.Name != d.Policy {
			continue
		}
		for j, l := range c.policy.Limits {
			if l == d.Limit {
				return c.ids[j]
			}
		}
	}
	if c := e.tierCheck(d.Policy); c != nil {
		for j, l := range c.policy.Limits {
			if l == d.Limit {
				return c.ids[j]
			}
		}
	}
	return d.Policy
}

// Reject describes a denial (res.Action == Deny).
func (e *Engine) Reject(res *Result) Rejection {
	r := Rejection{Reason: res.Reason, Decision: res.Decision}
	if res.Reason != ReasonNoKey {
		r.RetryAfter, _ = respond.RetryAfterSeconds(res.Decision.RetryAfter)
	}
	switch res.Reason {
	case ReasonUnavailable:
		r.Status, r.ContentType, r.Body = http.StatusServiceUnavailable, respond.ContentTypeProblem, e.unavailable
		return r
	case ReasonNoKey:
		// not a quota denial: neither the quota status nor a quota body
		r.Status, r.ContentType, r.Body = respond.NoKeyStatus, respond.ContentTypeProblem, e.noKeyBody
		return r
	}
	r.Status = e.cfg.status
	if e.cfg.bodySet {
		r.ContentType, r.Body = e.cfg.bodyType, e.cfg.body
		return r
	}
	r.ContentType = respond.ContentTypeProblem
	r.Body = e.checks[0].body
	for i := range e.checks {
		if e.checks[i].policy.Name == res.Decision.Policy {
			r.Body = e.checks[i].body
			break
		}
	}
	if c := e.tierCheck(res.Decision.Policy); c != nil {
		r.Body = c.body
	}
	return r
}

// unseen is d, hidden from escape analysis (read back from a uintptr's
// memory): a pointer passed through an interface call escapes, and with
// it the adapter's Result, an allocation per request. TakeTo must not
// keep d (core.DirectStore), so that the Result may stay on the stack.
func unseen(d *core.Decision) *core.Decision {
	x := uintptr(unsafe.Pointer(d))
	return *(**core.Decision)(unsafe.Pointer(&x))
}
