package fleet

import (
	"context"
	"slices"
	"time"

	"github.com/limitkit/limitkit/core"
)

// The local share of a FailLocal policy, and its flap share.
//
// A tier that cannot reach the remote store decides a FailLocal policy
// from its share, each limit divided by the fleet size N. Those local
// admissions reach the remote store only when the tier reaches it again;
// meanwhile the remote store admits the other tiers up to the limit L.
// While the store flaps, that is what happens in every window: some tiers
// are cut off (a call timed out, a breaker is cooling down) while others
// are answered, so up to L + (N−1)·L/N per window (1.46–1.75 L was seen
// with 4 tiers).
//
// The flap share closes it: until the domain has failed every call for
// the flap horizon (flapHorizon), a local admission must also fit in a
// quarter of the share (each limit divided by 4N, at least 1), and every
// unit the tier admitted remotely or locally in the window is charged to
// that quarter too. While a domain answers now and then, the tiers cut
// off at any moment admit at most L/4 in all on top of what the remote
// store admits: at most 1.25 L per window (L + N when L/(4N) rounds to
// less than 1). After a horizon of failures, with no answer at all, the
// outage is taken for real and the full share applies (L per window from
// N tiers).

// flapShareDiv divides the share into the flap share.
const flapShareDiv = 4

// flapHorizon is how long a domain must fail every call before a FailLocal
// policy gets its full local share (0: at once, no flap share):
// WithFlapHorizon's, else 10 s, and at least twice the
// breaker's cool-down and two probe intervals (a domain that answers
// between outages is seen answering by a probe within that).
func (c *config) flapHorizon() time.Duration {
	if c.flapSet {
		return c.flap
	}
	return max(defaultFlapHorizon, 2*c.coolDown+2*c.probe)
}

// flapping reports whether key's domain answered within the flap
// horizon, or has not failed since it last answered (or since New): a
// local decision then also fits in the flap share.
func (s *fleetStore) flapping(key string, pi *pinfo) bool {
	h := s.cfg.flapHorizon()
	if h <= 0 || pi.flap == nil {
		return false
	}
	down := s.breakerFor(key, pi.p).downAt.Load()
	return down == 0 || time.Duration(s.cfg.clock.Now().UnixNano()-down) < h
}

// flapPolicy is the flap share of a FailLocal policy whose local share is
// local: each limit divided by flapShareDiv (at least 1); nil when that
// divides nothing (every limit is 1 already) or is not valid.
func flapPolicy(local *core.Policy) *core.Policy {
	if local == nil {
		return nil
	}
	fp := localPolicy(local, flapShareDiv)
	if fp == nil || slices.Equal(fp.Limits, local.Limits) {
		return nil
	}
	return fp
}

// localTake decides cost for key on its local share (the fallback of a
// FailLocal policy); while the domain flaps, only when the flap share
// admits it too. What the share admits is charged to the flap share as
// far as it has room, so that it counts when the domain flaps again.
func (s *fleetStore) localTake(ctx context.Context, key string, pi *pinfo, now time.Time, cost int64) (core.Decision, error) {
	if pi.flap == nil || !s.flapping(key, pi) {
		d, err := s.local.Take(ctx, key, pi.local, now, cost)
		if err == nil && d.Allowed && !d.Shadowed {
			s.chargeShare(ctx, key, pi.flap, now, cost)
		}
		return d, err
	}
	fd, err := s.local.Take(ctx, key, pi.flap, now, cost)
	if err != nil || !fd.Allowed || fd.Shadowed {
		return fd, err
	}
	d, err := s.local.Take(ctx, key, pi.local, now, cost)
	if err != nil || !d.Allowed || d.Shadowed {
		_, _ = s.local.Credit(ctx, key, pi.flap, now, cost)
		return d, err
	}
	d.Remaining = min(d.Remaining, fd.Remaining)
	return d, nil
}

// localPeek is the local share's Peek for key, and the flap share's when
// the domain flaps and it denies or leaves less.
func (s *fleetStore) localPeek(ctx context.Context, key string, pi *pinfo, now time.Time, cost int64) (core.Decision, error) {
	d, err := s.local.Peek(ctx, key, pi.local, now, cost)
	if err != nil || pi.flap == nil || !s.flapping(key, pi) {
		return d, err
	}
	fd, ferr := s.local.Peek(ctx, key, pi.flap, now, cost)
	if ferr == nil && (!fd.Allowed || fd.Remaining < d.Remaining) && d.Allowed {
		return fd, nil
	}
	return d, err
}

// chargeShare charges n units to key's state under lp in the embedded
// store as far as it has room (nothing when lp is nil).
func (s *fleetStore) chargeShare(ctx context.Context, key string, lp *core.Policy, now time.Time, n int64) {
	if lp == nil || n <= 0 {
		return
	}
	d, err := s.local.Take(ctx, key, lp, now, 0)
	if err != nil || d.Remaining <= 0 {
		return
	}
	_, _ = s.local.Take(ctx, key, lp, now, min(n, d.Remaining))
}
