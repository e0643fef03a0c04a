package httplimit

import (
	"context"
	"sync"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit/internal/respond"
)

// WithLimitSource takes each client's limits from the application's own
// data at request time: the client key of New's key function ([WithKey]:
// a user id from a verified claim, a tenant header; for keyfuncs.APIKey
// the key's hash) is the identity src's [core.LimitSource] is asked
// about, through src's cache (its TTL, Invalidate, fallback: see
// [core.Sourced]). An identity the source has limits for is decided by
// them, under a policy of its own named after New's; any other (not
// found, or a fallback to the rule's own limits) goes on to
// [WithOverrides], [WithTiers] and New's limiter as without the source.
// A fallback key (the IP when the key function found no key) is never
// looked up. When an identity's limits change, its first request after
// the change carries the use of its key to the new limits (see
// [core.Sourced.SelectKey]: a raise from 5 to 10 after 5 used admits 5
// more, a cut from 10 to 5 after 3 used 2 more).
//
// src must be built on the limiter passed to New
// (core.NewSourced(limiter, source, cfg)), or New fails: its "not found"
// is New's limiter. Keep src to call src.Invalidate(id) when an
// identity's limits change. The headers and the denial describe the
// identity's own limits. With [WithOutcome], leave
// SourceConfig.FailModeOnError false: the fail-mode decision has no
// quota to charge. Every adapter (nethttp, ginlimit, echolimit,
// fiberlimit, grpclimit) takes it as httplimit.WithLimitSource.
func WithLimitSource(src *core.Sourced) Option {
	return func(c *config) {
		if src == nil {
			c.fail("WithLimitSource(nil): pass the core.Sourced built with core.NewSourced on New's limiter")
			return
		}
		c.pol.source = src
	}
}

// sourceChecks is the checks of a source's limit sets, built on first
// use, by policy name. It is bounded: limit sets come and go (a Sourced
// keeps at most 64 live), and when it holds maxSourceChecks it starts
// afresh.
type sourceChecks struct {
	mu sync.RWMutex
	m  map[string]*check
}

const maxSourceChecks = 256

// sourceCheck is the check of l, a limiter src.Select returned.
func (e *Engine) sourceCheck(l *core.Limiter) *check {
	sc := &e.pol.srcChecks
	name := l.Policy().Name
	sc.mu.RLock()
	c := sc.m[name]
	sc.mu.RUnlock()
	if c != nil && c.lim == l {
		return c
	}
	c = e.newTierCheck(l)
	sc.mu.Lock()
	if sc.m == nil || len(sc.m) >= maxSourceChecks {
		sc.m = map[string]*check{}
	}
	sc.m[name] = c
	sc.mu.Unlock()
	return c
}

// sourcedCheck is the check of the source's limit set named policy, or
// nil.
func (e *Engine) sourcedCheck(policy string) *check {
	sc := &e.pol.srcChecks
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.m[policy]
}

// chooseSource is the check of client's own limits, or nil when the
// rule's own apply; key is the store key of client's requests, whose use
// a change of client's limits carries to the new ones.
func (e *Engine) chooseSource(ctx context.Context, client, key string) *check {
	src := e.pol.source
	if l := src.SelectKey(ctx, client, key); l != src.Default() {
		return e.sourceCheck(l)
	}
	return nil
}

// newTierCheck is the check of limiter l deciding in the primary check's
// place (a tier, an override, a source's limit set): the primary's key,
// l's policy, and the RateLimit-Policy field of l's limits and the other
// checks'.
func (e *Engine) newTierCheck(l *core.Limiter) *check {
	prim := &e.checks[0]
	pp := l.Policy()
	c := &check{lim: l, key: prim.key, policy: pp, ids: respond.LimitIDs(pp), body: respond.QuotaExceededBody(e.cfg.status, pp.Name)}
	var pf []byte
	for i, lim := range pp.Limits {
		if len(pf) > 0 {
			pf = append(pf, ", "...)
		}
		pf = respond.AppendPolicyItem(pf, c.ids[i], lim)
	}
	seen := map[string]bool{prim.policy.Name: true}
	for _, x := range e.checks[1:] {
		if seen[x.policy.Name] {
			continue
		}
		seen[x.policy.Name] = true
		for i, lim := range x.policy.Limits {
			pf = append(pf, ", "...)
			pf = respond.AppendPolicyItem(pf, x.ids[i], lim)
		}
	}
	c.pf = string(pf)
	return c
}
