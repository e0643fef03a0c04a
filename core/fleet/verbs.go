package fleet

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// defaultDenyCacheTTL is how long a deny-cache entry answers at most
// unless WithDenyCacheTTL says otherwise: the bound within which a Reset
// made through another server (or any refund there) is honoured here.
const defaultDenyCacheTTL = time.Second

// WithDenyCacheTTL bounds how long a cached denial answers without a
// round trip (default 1 s), whatever its RetryAfter: a
// denial older than d is asked of the remote store again (and cached
// again if still denied, with the remote store's exact RetryAfter). A
// Reset through one server drops that server's entry at once;
// every other server of the fleet honours it within d. A longer d saves
// round trips for clients that keep hammering while denied. d = 0 turns
// the deny cache off: every request not served from a lease goes to the
// remote store. d must be >= 0.
func WithDenyCacheTTL(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("WithDenyCacheTTL(%v): the bound must be >= 0 (0 turns the deny cache off)", d))
		}
		c.denyTTL, c.noDenyCache = d, d == 0
	}
}

// denyTTL is the deny cache's bound in µs.
func (s *fleetStore) denyTTL() int64 {
	if s.cfg.denyTTL > 0 {
		return s.cfg.denyTTL.Microseconds()
	}
	return defaultDenyCacheTTL.Microseconds()
}

var (
	_ storekit.VerbStore    = (*fleetStore)(nil)
	_ storekit.ReserveStore = (*fleetStore)(nil)
)

// remoteVerbs returns the remote store's verbs.
func (s *fleetStore) remoteVerbs(verb string, p *core.Policy) (storekit.VerbStore, *pinfo, error) {
	if p == nil {
		return nil, nil, fmt.Errorf("fleet: %s: nil policy", verb)
	}
	if s.closed.Load() {
		return nil, nil, core.ErrClosed
	}
	pi, err := s.info(p)
	if err != nil {
		return nil, nil, err
	}
	vs, ok := s.remote.(storekit.VerbStore)
	if !ok {
		return nil, nil, fmt.Errorf("%w: fleet: %s needs a remote store that implements storekit.VerbStore; %T does not", core.ErrUnsupported, verb, s.remote)
	}
	return vs, pi, nil
}

// The verbs go through the failure handling of a decision (the package
// doc's "Quota verbs"): each is one call to the remote store through the
// breaker of the key's failure domain (remoteVerb), and when that call
// fails or the breaker is open, a FailLocal policy (FailOpen read as
// WithDefaultFailMode's) gets its local share's Degraded decision with
// the error (degraded); any other policy, or a caller that cancelled its
// own context, a zero decision and the error, to which the Limiter
// applies the fail mode.

// remoteVerb runs call, a verb's call to the remote store for key under
// pi, through the key's breaker, and reports its outcome there.
func (s *fleetStore) remoteVerb(ctx context.Context, key string, pi *pinfo, call func() error) error {
	b := s.breakerFor(key, pi.p)
	if !b.allow() {
		return fmt.Errorf("fleet: %w", core.ErrCircuitOpen)
	}
	start := s.health.Now()
	err := call()
	if s.report(ctx, b, err, start) == outage {
		b.probe.Store(&ekey{p: pi.p, key: key})
	}
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	return nil
}

// degraded is a verb's answer after its remote call failed with err: for
// a FailLocal policy, local's decision on the key's share in the embedded
// store (local gets the divided policy), marked Degraded, with err; else
// a zero decision and err.
func (s *fleetStore) degraded(ctx context.Context, pi *pinfo, err error, local func(*core.Policy) (core.Decision, error)) (core.Decision, error) {
	if pi.failMode != core.FailLocal || pi.local == nil || cancelled(ctx) {
		return core.Decision{}, err
	}
	d, lerr := local(pi.local)
	if lerr != nil {
		return core.Decision{}, errors.Join(err, lerr)
	}
	d.Degraded, d.Policy = true, pi.p.Name
	return d, err
}

// Peek is the remote store's Peek (one round trip; nothing consumed). In
// write-back mode units this server holds leased (charged at the remote
// store, not yet spent) are not counted as remaining by a peek of cost
// > 0: it is conservative by at most the lease. A peek of cost 0 (a
// usage read, core.Limiter.Usage) adds them to Remaining, so that what
// it reports used is what was admitted; other servers' leases still
// count as used until they expire. Failures as the verbs' above.
func (s *fleetStore) Peek(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, pi, err := s.remoteVerbs("Peek", p)
	if err != nil {
		return core.Decision{}, err
	}
	var d core.Decision
	if err := s.remoteVerb(ctx, key, pi, func() (err error) {
		d, err = vs.Peek(ctx, key, p, now, cost)
		return err
	}); err != nil {
		return s.degraded(ctx, pi, err, func(*core.Policy) (core.Decision, error) {
			return s.localPeek(ctx, key, pi, now, cost)
		})
	}
	if cost == 0 && pi.writeBack && d.Allowed {
		d.Remaining += s.leasedHere(key, pi, now.UnixMicro())
	}
	return d, nil
}

// leasedHere is the units of key's lease this server may still spend at
// t (0 without one).
func (s *fleetStore) leasedHere(key string, pi *pinfo, t int64) int64 {
	if len(key) > maxKeyLen {
		return 0
	}
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[ekey{p: pi.p, key: key}]; e != nil && e.lease > 0 && t >= e.leaseAt && t < e.leaseUntil {
		return e.lease
	}
	return 0
}

// Reset resets key at the remote store and forgets this server's entry
// for it: its cached denial, its leased units (they were charged before
// the reset; spending them would admit more than a fresh quota), its
// locally counted denials and owed fallback admissions, and the key's
// state in the local fallback store (all of it even when the remote
// reset fails). Other servers of the fleet honour the reset within the
// deny cache's bound (WithDenyCacheTTL: their cached denials expire);
// their leases, at most the lease cap per server, stay spendable until
// they expire (one sync interval). Failures as the verbs' above.
func (s *fleetStore) Reset(ctx context.Context, key string, p *core.Policy) error {
	vs, pi, err := s.remoteVerbs("Reset", p)
	if err != nil {
		return err
	}
	s.forgetKey(key, p, true)
	if pi.local != nil {
		_ = s.local.Reset(ctx, key, pi.local)
	}
	if pi.flap != nil {
		_ = s.local.Reset(ctx, key, pi.flap)
	}
	return s.remoteVerb(ctx, key, pi, func() error { return vs.Reset(ctx, key, p) })
}

// Charge charges key at the remote store (see storekit.VerbStore), drops
// this server's cached denial for it, and charges the key's share in the
// local fallback store as far as it has room (as a remote admission is).
// Failures as the verbs' above.
func (s *fleetStore) Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, pi, err := s.remoteVerbs("Charge", p)
	if err != nil {
		return core.Decision{}, err
	}
	s.forgetKey(key, p, false)
	var d core.Decision
	if err := s.remoteVerb(ctx, key, pi, func() (err error) {
		d, err = vs.Charge(ctx, key, p, now, cost)
		return err
	}); err != nil {
		return s.degraded(ctx, pi, err, func(lp *core.Policy) (core.Decision, error) {
			if cost > 0 && len(key) <= maxKeyLen && !pi.elastic {
				s.owe(key, pi, min(cost, pi.maxCost))
			}
			if pi.flap != nil {
				_, _ = s.local.Charge(ctx, key, pi.flap, now, cost)
			}
			return s.local.Charge(ctx, key, lp, now, cost)
		})
	}
	s.chargeLocal(ctx, key, pi, now, min(max(cost, 0), pi.maxCost))
	return d, nil
}

// Credit refunds key at the remote store (storekit.VerbStore's Credit, the
// store side of core.Limiter.Refund), drops this server's cached denial
// for it, which the refund may have made too long, and refunds the key's
// share in the local fallback store. Failures as the verbs' above.
func (s *fleetStore) Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, pi, err := s.remoteVerbs("Refund", p)
	if err != nil {
		return core.Decision{}, err
	}
	s.forgetKey(key, p, false)
	var d core.Decision
	if err := s.remoteVerb(ctx, key, pi, func() (err error) {
		d, err = vs.Credit(ctx, key, p, now, cost)
		return err
	}); err != nil {
		return s.degraded(ctx, pi, err, func(lp *core.Policy) (core.Decision, error) {
			s.unowe(key, pi, cost)
			if pi.flap != nil {
				_, _ = s.local.Credit(ctx, key, pi.flap, now, cost)
			}
			return s.local.Credit(ctx, key, lp, now, cost)
		})
	}
	if pi.failMode == core.FailLocal && pi.local != nil {
		_, _ = s.local.Credit(ctx, key, pi.local, now, cost)
		if pi.flap != nil {
			_, _ = s.local.Credit(ctx, key, pi.flap, now, cost)
		}
	}
	return d, nil
}

// Reserve is the remote store's Reserve when it has one (the Redis store
// does), so that waiters on every server queue at the remote store in one
// round trip each, through the key's breaker; else it is Take. When the
// call fails or the breaker is open it is the fallback's decision, as
// Take's (no reservation). Errors as Take's remote ones.
func (s *fleetStore) Reserve(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64, maxWait time.Duration) (core.Decision, error) {
	rs, ok := s.remote.(storekit.ReserveStore)
	if !ok || p == nil {
		return s.Take(ctx, key, p, now, cost)
	}
	if s.closed.Load() {
		return core.Decision{}, core.ErrClosed
	}
	pi, err := s.info(p)
	if err != nil {
		return core.Decision{}, err
	}
	cost = min(max(cost, 0), pi.maxCost)
	var d core.Decision
	if err := s.remoteVerb(ctx, key, pi, func() (err error) {
		d, err = rs.Reserve(ctx, key, p, now, cost, maxWait)
		return err
	}); err != nil {
		if cancelled(ctx) {
			return core.Decision{}, err
		}
		return s.fallback(ctx, key, pi, now, cost, errors.Unwrap(err))
	}
	if d.Allowed && !d.Shadowed {
		s.chargeLocal(ctx, key, pi, now, cost)
	}
	return d, nil
}

// forgetKey drops the key's cached denial and, with all, its lease and
// pending denied counts.
func (s *fleetStore) forgetKey(key string, p *core.Policy, all bool) {
	if len(key) > maxKeyLen {
		return
	}
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	sh.mu.Lock()
	if e := sh.m[ekey{p: p, key: key}]; e != nil {
		e.denyCost = 0
		if all {
			e.lease, e.pending, e.lastAt, e.remaining = 0, 0, 0, 0
		}
	}
	sh.mu.Unlock()
}

// unowe cancels up to cost of the key's owed fallback admissions (a
// refund during an outage of what was charged during it).
func (s *fleetStore) unowe(key string, pi *pinfo, cost int64) {
	if len(key) > maxKeyLen || cost <= 0 {
		return
	}
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	sh.mu.Lock()
	if e := sh.m[ekey{p: pi.p, key: key}]; e != nil {
		e.pending = max(0, e.pending-cost)
	}
	sh.mu.Unlock()
}
