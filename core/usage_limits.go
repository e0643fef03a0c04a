package core

import (
	"context"
	"time"
)

// limitsPeeker is a [Store] that reads a key's state limit by limit (the
// embedded, Redis and fleet stores): PeekLimits returns one Decision per
// limit of p, in p.Limits' order, each as [Compiled.ReportTo] would
// report that limit alone at now: Limit the limit, Remaining what it
// admits now, ResetAfter its time until full, Allowed whether a request
// of cost 1 would pass it and, when not, RetryAfter the exact wait (never
// Shadowed: the caller applies shadow mode). It consumes and writes
// nothing. Safe for concurrent use.
type limitsPeeker interface {
	PeekLimits(ctx context.Context, key string, p *Policy, now time.Time) ([]Decision, error)
}

// usageOf is a Decision of a cost of 0 (or ReportTo's) read as a Usage.
func (l *Limiter) usageOf(d Decision) Usage {
	u := Usage{Limit: d.Limit, Remaining: d.Remaining, ResetAfter: d.ResetAfter, Policy: l.policy.Name, Degraded: d.Degraded}
	if !d.Allowed || d.Shadowed {
		u.RetryAfter = d.RetryAfter
	}
	if c := d.Limit.capacity(); c > 0 {
		u.Used = max(0, c-d.Remaining)
	}
	return u
}

// limitUsages fills u.Limits: one Usage per limit of the policy. A policy
// of one limit has its binding figures; several are read from a store
// that implements limitsPeeker (one more store call; the Redis store's
// are one or two per limit) within the Limiter's store timeout. nil when
// the store cannot, or the read fails (err says why: the binding figures
// stand).
func (l *Limiter) limitUsages(ctx context.Context, key string, u *Usage) error {
	if len(l.policy.Limits) == 1 {
		one := *u
		u.Limits = []Usage{one}
		return nil
	}
	lp, ok := l.store.(limitsPeeker)
	if !ok {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cctx := ctx
	if !l.local {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	ds, err := lp.PeekLimits(cctx, key, l.policy, l.clock.Now())
	if err != nil {
		return err
	}
	if len(ds) != len(l.policy.Limits) {
		return nil
	}
	u.Limits = make([]Usage, len(ds))
	for i, d := range ds {
		d.Shadowed = false
		if d.Allowed {
			d.RetryAfter = 0
		}
		lu := l.usageOf(d)
		lu.Limit = l.policy.Limits[i]
		if c := lu.Limit.capacity(); c > 0 {
			lu.Used = max(0, c-lu.Remaining)
		}
		u.Limits[i] = lu
	}
	return nil
}
