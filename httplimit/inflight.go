package httplimit

import (
	"context"

	"github.com/limitkit/limitkit/core"
)

// WithConcurrency adds an in-flight limit to the middleware: a request
// holds one of c's slots, under the primary check's store key (the scope
// and the client key, as the limiter's), from its admission until its
// handler returns — also when the handler panics, when the client went
// away (a cancelled context), and on a hijacked connection (the handler
// returned); for gRPC, until the unary handler returns or the stream
// ends. Every adapter of this module supports it (it releases the slot
// where it settles [WithOutcome]).
//
// Order: the slot is taken first, then the rate checks decide. A request
// the concurrency limit denies charges no rate limit; one a rate limit
// denies gives its slot back at once. A denial by the concurrency limit
// is a quota denial like the others: the deny status (429), the same
// body and header fields, Retry-After from c's decision (see
// core.Concurrency). On an admitted request the header fields are the
// binding decision's: the one with the least Remaining among the rate
// decision and the slot's. A store failure follows c's fail mode (open
// admits holding nothing; closed denies with 503, as a rate check's).
// The skip function skips it too; a request without a key (see
// [WithNoKeySkip]) takes no slot. c must not be nil.
func WithConcurrency(c *core.Concurrency) Option {
	return func(cfg *config) {
		if c == nil {
			cfg.fail("WithConcurrency(nil): pass a *core.Concurrency (core.NewConcurrency)")
			return
		}
		cfg.conc = c
	}
}

// initConcurrency adds the concurrency limit's size to the header texts.
func (e *Engine) initConcurrency() {
	if c := e.cfg.conc; c != nil && e.limitEntry(c.Policy().Max) == nil {
		e.limitText = append(e.limitText, newLimitText(c.Policy().Max))
	}
}

// decideHeld is decide under WithConcurrency: take a slot of the primary
// key, then decide the rate checks, giving the slot back unless the
// request passed (res.slot then holds it until Outcome).
func (e *Engine) decideHeld(ctx context.Context, req Request, res *Result) {
	if e.cfg.skip != nil && e.cfg.skip(req) {
		res.Action = Skip
		return
	}
	var kbuf [192]byte
	scope := e.appendScope(kbuf[:0], req)
	key, st, _ := e.key(ctx, &e.checks[0], req, scope)
	if st != keyOK {
		e.decideRate(ctx, req, res)
		return
	}
	slot, d, err := e.cfg.conc.Acquire(ctx, key)
	if !d.Allowed {
		res.Decision = d
		e.finish(ctx, res, err)
		return
	}
	if err != nil {
		e.report(ctx, err)
	}
	e.decideRate(ctx, req, res)
	if res.Action != Pass {
		slot.Release()
		return
	}
	res.slot = slot
	if err != nil {
		res.Degraded = true
	} else if !res.decided || d.Remaining < res.Decision.Remaining {
		// the binding decision: the slot's has the least room
		res.Decision, res.decided = d, true
	}
}

// decideRate is decide's rate checks, without the key cache's parts.
func (e *Engine) decideRate(ctx context.Context, req Request, res *Result) {
	e.decideChecks(ctx, req, nil, res)
}

// releaseHeld gives back the slot res holds, if any.
func releaseHeld(res *Result) {
	s := res.slot
	res.slot = core.Slot{}
	s.Release()
}
