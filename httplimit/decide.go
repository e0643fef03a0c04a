package httplimit

import (
	"context"

	"github.com/limitkit/limitkit/core"
)

// Decide decides the request req is the view of, writing the result into
// *res, which must be the zero Result (a fresh variable on the adapter's
// stack; the fields a decision leaves unset are not cleared again): it runs
// the skip hook, derives each check's key and decides. ctx is the request's
// context (the store deadline derives from it). It reports whether it
// decided, which it always does when req is not nil.
//
// p is nil, or the request's [KeyParts], which an adapter whose engine is
// [Engine.PartsKeyed] may pass to decide from the key cache when it knows
// them (a client that asked the route recently); the engine hashes them
// once and the adapter builds them without an interface call. p must be the
// parts the engine would read from req, route as PartsKeyed said: what the
// view's [KeyParter] returns with ok. On a cache miss Decide decides with
// req (and caches its key under p); with req nil, it decides nothing,
// leaves *res as it was and reports false, and the adapter calls Decide
// again with a view (an adapter whose view costs something to build builds
// it only then). Decide never panics on any request.
func (e *Engine) Decide(ctx context.Context, req Request, p *KeyParts, res *Result) bool {
	return e.decide(ctx, req, p, res)
}

// PartsKeyed reports whether the engine's store key is a function of a
// request's [KeyParts] (one check, the default peer-IP key, the default
// or a fixed scope, no skip or cost function, no tiers, overrides or
// counting by outcome), so that [Engine.Decide] can decide by them, and
// whether those parts include the route (the argument of
// [KeyParter.KeyParts]; false under WithScope). An adapter whose request
// view costs something to build (an allocation, a pool) asks once, at
// construction.
func (e *Engine) PartsKeyed() (ok, route bool) {
	return e.cacheID != 0 && e.cfg.skip == nil && e.cfg.cost == nil, !e.scopeFixed
}

// decide is Decide for req or, when p is not nil, for p and req (which
// takes only the one check's branch; on an engine that is not PartsKeyed
// it decides by req, and it reports false with req nil there or on a
// miss, *res untouched), in one function: a decision on the common path
// is a single call from the adapter.
func (e *Engine) decide(ctx context.Context, req Request, p *KeyParts, res *Result) bool {
	if p != nil && (e.cacheID == 0 || e.cfg.skip != nil || e.cfg.cost != nil) { // not PartsKeyed
		if req == nil {
			return false
		}
		p = nil
	}
	if e.cfg.conc != nil {
		if p != nil {
			return false
		}
		e.decideHeld(ctx, req, res)
		return true
	}
	return e.decideChecks(ctx, req, p, res)
}

// decideChecks is decide's rate checks.
func (e *Engine) decideChecks(ctx context.Context, req Request, p *KeyParts, res *Result) bool {
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
		var kbuf [192]byte
		scope := e.appendScope(kbuf[:0], req)
		var own bool
		if key, st, own = e.key(ctx, c, req, scope); own && c.key.fn != nil && e.cfg.identity {
			res.ident = key[len(scope)+1:]
		}
	}
	if st != keyOK {
		e.noKeyResult(res, c, st, key)
		return true
	}
	var err error
	if e.ownClock {
		// the limiter's clock, read once for the decision and the headers
		res.now = e.cfg.clock.Now()
		res.Decision, err = c.lim.AllowNAt(ctx, key, res.now, cost)
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
func (e *Engine) decideAll(ctx context.Context, req Request, res *Result, cost int64) {
	if e.pol != nil {
		e.decidePolicies(ctx, req, res, cost)
		return
	}
	var kbuf [192]byte
	scope := e.appendScope(kbuf[:0], req)
	var cbuf [maxChecks]core.Check
	list := cbuf[:0]
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
		if i == 0 && own && c.key.fn != nil && e.cfg.identity {
			res.ident = key[len(scope)+1:]
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

// noKeyResult is the result of check c without a key (st is not keyOK):
// skip it, deny for want of a key, or refuse (a keyfuncs.Refusal's status,
// detail its Detail).
func (e *Engine) noKeyResult(res *Result, c *check, st keyStatus, detail string) {
	if st == keySkip {
		res.Action = Pass
		return
	}
	res.Action, res.Reason = Deny, ReasonNoKey
	if st >= 400 {
		res.Reason, res.refused, res.refusal = ReasonRefused, uint16(st), detail
	}
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
