package httplimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
)

// policies is an engine's tiers, overrides and counting by outcome
// ([WithTiers], [WithOverrides], [WithOutcome]). An engine with any
// of them decides every request on decidePolicies' path.
type policies struct {
	tier      keyfuncs.Func
	tiers     map[string]*check // by tier name
	overrides map[string]*check // by client key
	byPolicy  map[string]*check // every tier's and override's check, by policy name
	count     func(status int) bool
	resetOK   bool
	first     bool
	source    *core.Sourced // WithLimitSource (source.go), or nil
	srcChecks sourceChecks  // the source's limit sets' checks
}

// outcome is what a request counted by outcome leaves for [Engine.Outcome]:
// the checks it was decided by and their keys. Allocated per request,
// only by engines with WithOutcome.
type outcome struct {
	n       int
	primary bool // lims[0] is the primary check's (its key was found)
	cost    int64
	lims    [maxChecks]*core.Limiter
	keys    [maxChecks]string
}

// initPolicies validates p against the engine's checks and sets e.pol.
func (e *Engine) initPolicies(p *policySpec) error {
	if p.tier == nil && len(p.tiers) == 0 && len(p.overrides) == 0 && p.count == nil && p.source == nil {
		return nil
	}
	prim := &e.checks[0]
	if _, err := core.NewTiers(prim.lim, p.tiers, p.overrides); err != nil {
		return fmt.Errorf("%s: %w", e.pkg, err)
	}
	if p.source != nil && p.source.Default() != prim.lim {
		return fmt.Errorf("%s: WithLimitSource: the core.Sourced was built on the limiter of policy %q, not on the limiter passed to New (policy %q); build it with core.NewSourced(limiter, ...)", e.pkg, p.source.Default().Policy().Name, prim.policy.Name)
	}
	pol := &policies{tier: p.tier, count: p.count, resetOK: p.resetOnSuccess, first: p.chargeFirst, source: p.source,
		tiers: map[string]*check{}, overrides: map[string]*check{}, byPolicy: map[string]*check{}}
	mk := func(l *core.Limiter) *check {
		for _, lim := range l.Policy().Limits {
			e.limitText = append(e.limitText, newLimitText(lim.Requests))
		}
		c := e.newTierCheck(l)
		pol.byPolicy[l.Policy().Name] = c
		return c
	}
	for name, l := range p.tiers {
		pol.tiers[name] = mk(l)
	}
	for key, l := range p.overrides {
		c := mk(l)
		pol.overrides[key] = c
		// the client as it sends itself: the key its key function gives
		// a request presenting key (an API key's hash), unless another
		// override names that key itself
		if d, ok := derivedKey(prim.key, key); ok && d != key {
			if _, taken := p.overrides[d]; !taken {
				pol.overrides[d] = c
			}
		}
	}
	if p.count != nil {
		lims := []*core.Limiter{}
		for i := range e.checks {
			lims = append(lims, e.checks[i].lim)
		}
		for _, c := range pol.byPolicy {
			lims = append(lims, c.lim)
		}
		for _, l := range lims {
			if !l.HasVerbs() {
				return fmt.Errorf("%s: WithOutcome: policy %q: its store does not implement the quota verbs (Peek, Charge, Refund, Reset); use memstore, redisstore or the fleet tier", e.pkg, l.Policy().Name)
			}
		}
	}
	e.pol = pol
	return nil
}

// tierCheck is the tier's or override's check of the named policy, or nil.
func (e *Engine) tierCheck(policy string) *check {
	if e.pol == nil {
		return nil
	}
	if c := e.pol.byPolicy[policy]; c != nil || e.pol.source == nil {
		return c
	}
	return e.sourcedCheck(policy)
}

// choose is the primary check for a request whose store key is key, with
// client key key[n:]:
// its own limits from the source, its override, its tier's, or checks[0]. fromKeyFunc is false for a
// fallback key, which never matches an override.
func (e *Engine) choose(ctx context.Context, req Request, key string, n int, fromKeyFunc bool) *check {
	p := e.pol
	client := key[n:]
	if fromKeyFunc && p.source != nil {
		if c := e.chooseSource(ctx, client, key); c != nil {
			return c
		}
	}
	if fromKeyFunc && len(p.overrides) > 0 {
		if c, ok := p.overrides[client]; ok {
			return c
		}
	}
	if p.tier != nil && len(p.tiers) > 0 {
		if t, err := p.tier(req); err == nil {
			if c, ok := p.tiers[t]; ok {
				return c
			}
		}
	}
	return &e.checks[0]
}

// decidePolicies is Decide for an engine with e.pol: the primary
// check's limiter chosen per request, and with counting by outcome a peek
// (or a take, ChargeFirst) whose charge (or refund) [Engine.Outcome] settles
// after the response.
func (e *Engine) decidePolicies(ctx context.Context, req Request, res *Result, cost int64) {
	var kbuf [192]byte
	scope := e.appendScope(kbuf[:0], req)
	n := len(scope) + 1 // the client key starts after the scope and keySep
	var cbuf [maxChecks]core.Check
	list := cbuf[:0]
	primary := false
	for i := range e.checks {
		c := &e.checks[i]
		key, st, own := e.key(ctx, c, req, scope)
		switch st {
		case keySkip:
			continue
		case keyOK:
		default:
			e.noKeyResult(res, c, st, key)
			return
		}
		if i == 0 {
			primary = true
			if own && c.key.fn != nil && e.cfg.identity {
				res.ident = key[n:]
			}
			if c = e.choose(ctx, req, key, n, own); c != &e.checks[0] {
				res.chk = c
			}
		}
		list = append(list, core.Check{Limiter: c.lim, Key: key, Cost: cost})
	}
	if len(list) == 0 {
		res.Action = Pass
		return
	}
	var err error
	if e.pol.count == nil || e.pol.first {
		res.Decision, err = core.AllowAll(ctx, list...)
	} else {
		res.Decision, err = peekAll(ctx, list)
	}
	e.finish(ctx, res, err)
	if e.pol.count != nil && res.Action == Pass {
		o := &outcome{n: len(list), primary: primary, cost: cost}
		for i := range list {
			o.lims[i], o.keys[i] = list[i].Limiter, list[i].Key
		}
		res.out = o
	}
}

// peekAll is core.AllowAll with PeekDecision: the binding decision of
// checks, consuming nothing, each check's peek a decision to the
// observer (metrics count the request as allowed or denied).
func peekAll(ctx context.Context, checks []core.Check) (core.Decision, error) {
	best := core.Decision{Allowed: true, Remaining: -1}
	var firstErr error
	for i := range checks {
		c := &checks[i]
		d, err := c.Limiter.PeekDecision(ctx, c.Key, c.Cost)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if !d.Allowed {
			return d, firstErr
		}
		if d.Degraded && !best.Degraded && best.Remaining >= 0 {
			continue
		}
		if best.Remaining < 0 || best.Degraded || d.Remaining < best.Remaining {
			best = d
		}
	}
	if best.Remaining < 0 {
		best.Remaining = 0
	}
	return best, firstErr
}

// CountsOutcome reports whether the adapter must call [Engine.Outcome]
// with the response's status after the handler of an admitted request
// ([WithOutcome], and [WithConcurrency], whose slot Outcome releases).
func (e *Engine) CountsOutcome() bool { return e.pol != nil && e.pol.count != nil || e.cfg.conc != nil }

// Outcomes that are no response status, which an adapter passes to
// [Engine.Outcome] in place of one. Each is a counted failure whatever
// Outcome.Count says: charged on every check (under ChargeFirst: the
// quota taken is kept), never a success, never a reset. Counting by
// outcome fails safe: a request whose outcome is unknown is charged, so
// that a client cannot make its attempts free by crashing the handler or
// by hanging up.
const (
	// OutcomePanic: the handler panicked (or called runtime.Goexit). The
	// adapter settles the request and lets the panic go on unchanged.
	OutcomePanic = -1
	// OutcomeUnwritten: the handler returned without writing a status
	// (net/http would answer 200 with an empty body, but nothing says the
	// handler succeeded: it may have given up on a client that went away).
	OutcomeUnwritten = -2
	// outcomeCanceled: the request's context had ended when the handler
	// returned (the client went away, the request was cancelled, its
	// deadline passed), whatever status was written. [Engine.Outcome]
	// finds it by itself from the context it is given: adapters do not
	// pass it.
	outcomeCanceled = -3
)

// outcomeTimeout (one second) bounds the store calls that settle a request after its
// response ([Engine.Outcome]): they run on a context detached from the
// request's cancellation (a client that hangs up before its failure is
// answered is still charged) with this deadline of its own, so that
// settling never outlives a hung store by more. Each limiter's own store
// deadline (core.WithTimeout, 50 ms by default) applies within it.
const outcomeTimeout = time.Second

// Outcome settles a request admitted under [WithOutcome] once its
// outcome is known: status is the response's status, or one of
// [OutcomePanic], [OutcomeUnwritten]. A counting
// status is charged on every check (unless ChargeFirst took it already),
// a status that does not count is refunded under ChargeFirst, and with
// ResetOnSuccess a success (below 400) that does not count resets the
// primary check's key. When ctx has ended (ctx.Err() is not nil) the
// outcome is a cancelled request, whatever status says: a request whose
// client went away is a counted failure, never a success.
//
// It first gives back the request's [WithConcurrency] slot, if it holds
// one. It does nothing for a request it has nothing to settle (denied,
// skipped, or an engine without WithOutcome); a second call for the same
// res settles nothing. The store calls run on a context detached from
// ctx's cancellation, with a deadline of one second, and report
// their errors to the error hook.
func (e *Engine) Outcome(ctx context.Context, res *Result, status int) {
	releaseHeld(res)
	o := res.out
	if o == nil {
		return
	}
	res.out = nil
	if ctx.Err() != nil {
		status = outcomeCanceled
	}
	p := e.pol
	counts := status < 0 || p.count(status)
	reset := !counts && p.resetOK && status < 400 && o.primary
	if counts == p.first && !reset {
		return // nothing to charge, refund or reset
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	for i := 0; i < o.n; i++ {
		var err error
		switch {
		case counts && !p.first:
			_, err = o.lims[i].Charge(ctx, o.keys[i], o.cost)
		case !counts && p.first:
			_, err = o.lims[i].Refund(ctx, o.keys[i], o.cost)
		}
		if err != nil {
			e.report(ctx, fmt.Errorf("%s: outcome %s, policy %q: %w", e.pkg, outcomeText(status), o.lims[i].Policy().Name, err))
		}
	}
	if reset {
		if err := o.lims[0].Reset(ctx, o.keys[0]); err != nil {
			e.report(ctx, fmt.Errorf("%s: reset on success, policy %q: %w", e.pkg, o.lims[0].Policy().Name, err))
		}
	}
}

// outcomeText names an outcome in error messages.
func outcomeText(status int) string {
	switch status {
	case OutcomePanic:
		return "panic"
	case OutcomeUnwritten:
		return "unwritten (no status)"
	case outcomeCanceled:
		return "canceled (the request's context ended)"
	}
	return "of status " + strconv.Itoa(status)
}

// presenting is a request that presents v wherever a key function may
// look for it: every header and query parameter, nothing else (no peer,
// no route, no context value).
type presenting string

func (v presenting) Method() string               { return "GET" }
func (v presenting) Route() string                { return "" }
func (v presenting) Path() string                 { return "/" }
func (v presenting) Header(string) string         { return string(v) }
func (v presenting) HeaderValues(string) []string { return []string{string(v)} }
func (v presenting) Query(string) string          { return string(v) }
func (v presenting) RemoteAddr() string           { return "" }
func (v presenting) Value(any) any                { return nil }

// derivedKey is the client key the key function k gives a request that
// presents v in its headers and query (keyfuncs.APIKey: v's hash), as it
// enters the store key; false when k finds no key in such a request (an
// IP key, a JWT) or panics.
func derivedKey(k keySpec, v string) (key string, ok bool) {
	if k.fn == nil || k.ip != nil || v == "" {
		return "", false
	}
	defer func() {
		if recover() != nil {
			key, ok = "", false
		}
	}()
	s, err := k.fn(presenting(v))
	if err != nil || s == "" {
		return "", false
	}
	if len(s) > maxKeyLen {
		s = keyfuncs.Bound(s)
	}
	return s, true
}
