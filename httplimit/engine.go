package httplimit

import (
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit/internal/respond"
	"github.com/limitkit/limitkit/keyfuncs"
)

// maxChecks bounds the checks of one middleware.
const maxChecks = 8

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
	slot     core.Slot // WithConcurrency: the held slot, given back by releaseHeld (inflight.go)
	ident    string    // the primary check's client key from its WithKey function (Identity)
	refused  uint16    // ReasonRefused: the keyfuncs.Refusal's status
	refusal  string    // ReasonRefused: its Detail
}

// Identity is the client key the primary check (the limiter passed to
// New) was decided under, when it came from that check's [WithKey] key
// function: for keyfuncs.FormField("username"), the username (bounded by
// keyfuncs.Bound) whose count the request was charged to, when the
// options include [WithIdentity]. It reports false without WithIdentity,
// and when the primary check used an IP key (the default, [WithIPKey]),
// the fallback key, or no key (skipped, denied, refused). Adapters put it
// on the admitted request's context ([ContextWithIdentity]) for the
// handler.
func (r *Result) Identity() (string, bool) { return r.ident, r.ident != "" }

type check struct {
	lim    *core.Limiter
	key    keySpec
	policy *core.Policy
	ids    []string
	body   []byte
	pf     string // the RateLimit-Policy field when this is a tier's check (policies_engine.go)
}

// Engine is the framework-neutral middleware every adapter runs: built
// once by [NewAdapterEngine] from a limiter and the options, it derives each
// request's store keys, decides, and says what to write. Adapters supply
// a keyfuncs.Request view of their framework's request and write what
// the engine decides; they hold no limiting logic. An Engine is immutable
// after NewAdapterEngine and safe for concurrent use; the zero value is not
// usable.
type Engine struct {
	pkg         string
	checks      []check
	scope       string
	scopeFixed  bool
	ownClock    bool // clock is the primary limiter's: one read serves the decision and the headers
	policyField string
	unavailable []byte
	noKeyBody   []byte
	peer        *keyfuncs.Resolver // the default key: keys by it take the IPv4 fast path
	cacheID     uint64             // the engine's key-cache id, 0 when its keys are not cached (see keycache.go)
	limitText   []limitText        // every check's limit sizes, formatted once
	pol         *policies          // tiers, overrides, counting by outcome (policies_engine.go); nil for none
	cfg         config             // the options, with defaults filled in: the fallback key, the clock
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
	if 1+len(cfg.extra) > maxChecks {
		return nil, fmt.Errorf("%s: %d checks, at most %d", pkg, 1+len(cfg.extra), maxChecks)
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
	e.initConcurrency()
	if len(e.checks) == 1 && e.cfg.scopeFunc == nil && e.checks[0].key.ip == peer && e.pol == nil && cfg.conc == nil {
		// the store key is a function of the method, the route and the peer
		e.cacheID = engineIDs.Add(1)
	}
	return e, nil
}

// clock returns the engine's clock: [WithClock]'s, else the primary
// limiter's.
func (e *Engine) clock() core.Clock { return e.cfg.clock }

// InFlight returns the [WithInFlight] counter, or nil. The adapter calls
// its Enter before Decide and its Exit when the rest of the chain has
// returned, for every request; with nil it counts nothing (and should
// build a handler that pays nothing for it).
func (e *Engine) InFlight() *core.InFlight { return e.cfg.inFlight }
