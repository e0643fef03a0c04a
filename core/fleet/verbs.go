package fleet

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/limitkit/limitkit/core"
)

// DefaultDenyCacheTTL is how long a deny-cache entry answers at most
// unless WithDenyCacheTTL says otherwise: the bound within which a Reset
// made through another server (or any refund there) is honoured here.
const DefaultDenyCacheTTL = time.Second

// WithDenyCacheTTL bounds how long a cached denial answers without a
// round trip (default DefaultDenyCacheTTL), whatever its RetryAfter: a
// denial older than d is asked of the remote store again (and cached
// again if still denied, with the remote store's exact RetryAfter). A
// [Store.Reset] through one server drops that server's entry at once;
// every other server of the fleet honours it within d. A longer d saves
// round trips for clients that keep hammering while denied; d must be > 0.
func WithDenyCacheTTL(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("WithDenyCacheTTL(%v): the bound must be > 0", d))
		}
		c.denyTTL = d
	}
}

// denyTTL is the deny cache's bound in µs.
func (s *Store) denyTTL() int64 {
	if s.cfg.denyTTL > 0 {
		return s.cfg.denyTTL.Microseconds()
	}
	return DefaultDenyCacheTTL.Microseconds()
}

var (
	_ core.VerbStore    = (*Store)(nil)
	_ core.ReserveStore = (*Store)(nil)
)

// remoteVerbs returns the remote store's verbs.
func (s *Store) remoteVerbs(verb string, p *core.Policy) (core.VerbStore, *pinfo, error) {
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
	vs, ok := s.remote.(core.VerbStore)
	if !ok {
		return nil, nil, fmt.Errorf("%w: fleet: %s needs a remote store that implements core.VerbStore; %T does not", core.ErrUnsupported, verb, s.remote)
	}
	return vs, pi, nil
}

// Peek is the remote store's Peek (one round trip; nothing consumed). In
// write-back mode units this server holds leased are not counted as
// remaining (they were charged at the remote store): a peek is
// conservative by at most the lease. The verbs go to the remote store
// directly, not through the breaker or the local fallback. Errors as
// Take's remote ones.
func (s *Store) Peek(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, _, err := s.remoteVerbs("Peek", p)
	if err != nil {
		return core.Decision{}, err
	}
	d, err := vs.Peek(ctx, key, p, now, cost)
	if err != nil {
		return core.Decision{}, fmt.Errorf("fleet: %w", err)
	}
	return d, nil
}

// Reset resets key at the remote store and forgets this server's entry
// for it: its cached denial, its leased units (they were charged before
// the reset; spending them would admit more than a fresh quota) and its
// locally counted denials, and the key's state in the local fallback
// store. Other servers of the fleet honour the reset within the deny
// cache's bound (WithDenyCacheTTL: their cached denials expire); their
// leases, at most the lease cap per server, stay spendable until they
// expire (one sync interval). Errors as Take's remote ones.
func (s *Store) Reset(ctx context.Context, key string, p *core.Policy) error {
	vs, pi, err := s.remoteVerbs("Reset", p)
	if err != nil {
		return err
	}
	s.forgetKey(key, p, true)
	if pi.local != nil {
		_ = s.local.Reset(ctx, key, pi.local)
	}
	if err := vs.Reset(ctx, key, p); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	return nil
}

// Charge charges key at the remote store (see core.VerbStore) and drops
// this server's cached denial for it. Errors as Take's remote ones.
func (s *Store) Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, _, err := s.remoteVerbs("Charge", p)
	if err != nil {
		return core.Decision{}, err
	}
	s.forgetKey(key, p, false)
	d, err := vs.Charge(ctx, key, p, now, cost)
	if err != nil {
		return core.Decision{}, fmt.Errorf("fleet: %w", err)
	}
	return d, nil
}

// Credit refunds key at the remote store (core.VerbStore's Credit, the
// store side of core.Limiter.Refund) and drops
// this server's cached denial for it, which the refund may have made too
// long. Errors as Take's remote ones.
func (s *Store) Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, _, err := s.remoteVerbs("Refund", p)
	if err != nil {
		return core.Decision{}, err
	}
	s.forgetKey(key, p, false)
	d, err := vs.Credit(ctx, key, p, now, cost)
	if err != nil {
		return core.Decision{}, fmt.Errorf("fleet: %w", err)
	}
	return d, nil
}

// Reserve is the remote store's Reserve when it has one (the Redis store
// does), so that waiters on every server queue at the remote store in one
// round trip each; else it is Take. Errors as Take's remote ones.
func (s *Store) Reserve(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64, maxWait time.Duration) (core.Decision, error) {
	rs, ok := s.remote.(core.ReserveStore)
	if !ok || p == nil {
		return s.Take(ctx, key, p, now, cost)
	}
	if s.closed.Load() {
		return core.Decision{}, core.ErrClosed
	}
	d, err := rs.Reserve(ctx, key, p, now, cost, maxWait)
	if err != nil {
		return core.Decision{}, fmt.Errorf("fleet: %w", err)
	}
	return d, nil
}

// forgetKey drops the key's cached denial and, with all, its lease and
// pending denied counts.
func (s *Store) forgetKey(key string, p *core.Policy, all bool) {
	if len(key) > MaxKeyLen {
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
