package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var (
	_ storekit.VerbStore    = (*redisStore)(nil)
	_ storekit.ReserveStore = (*redisStore)(nil)
)

// Peek returns the decision Take would return, in one script call that
// writes nothing (see verbs_scripts.go; the sliding window log's reads
// the rings and decides in Go, see verbs_log.go). Errors as Take.
func (s *redisStore) Peek(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(ctx, "Peek", key, p, now, cost, -1)
}

// Charge consumes cost even beyond the limit (core.Compiled.ChargeTo), in
// one script call, for every algorithm (the debt bounded as core states:
// one full quota for GCRA and the token bucket, the rest of the window
// for the fixed window, one window for the sliding ones). Errors as Peek.
func (s *redisStore) Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(ctx, "Charge", key, p, now, cost, -1)
}

// Credit returns up to cost units (core.Compiled.RefundTo: the store side
// of core.Limiter.Refund), in one script call. Errors as Peek.
func (s *redisStore) Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.verb(ctx, "Refund", key, p, now, cost, -1)
}

// Reserve admits now or reserves a later admission
// (core.Compiled.ReserveTo), in one script call, for GCRA and the token
// bucket; for the other algorithms, and Shadow or elastic policies, it is
// Take. Errors as Take.
func (s *redisStore) Reserve(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64, maxWait time.Duration) (core.Decision, error) {
	if p == nil || p.Shadow || p.Elastic != nil || (p.Algorithm != core.GCRA && p.Algorithm != core.TokenBucket) {
		return s.Take(ctx, key, p, now, cost)
	}
	return s.verb(ctx, "Reserve", key, p, now, cost, max(0, maxWait.Microseconds()))
}

// Reset deletes key's state under p (every limit's key, one DEL under the
// hash tag, through a script as the other verbs): its next request is a
// fresh key's. Errors as Take.
func (s *redisStore) Reset(ctx context.Context, key string, p *core.Policy) error {
	if p == nil {
		return errors.New("redisstore: Reset: nil policy")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := s.policy(p)
	if err != nil {
		return err
	}
	args := make([]any, 3, 3+len(c.suffixes))
	args[0], args[1], args[2] = "evalsha", resetScript.shaArg, c.nkeys
	var kb [maxKeyBase + 8]byte
	base := s.keyBase(kb[:0], c, key)
	for _, suf := range c.suffixes {
		args = append(args, string(append(base, suf...)))
	}
	if _, err := resetScript.run(ctx, s.client, args); err != nil {
		return fmt.Errorf("redisstore: policy %q: Reset: %w", p.Name, replyErr(err))
	}
	return nil
}

func (s *redisStore) verb(ctx context.Context, verb, key string, p *core.Policy, now time.Time, cost, maxWait int64) (core.Decision, error) {
	if p == nil {
		return core.Decision{}, fmt.Errorf("redisstore: %s: nil policy", verb)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := s.policy(p)
	if err != nil {
		return core.Decision{}, err
	}
	return s.verbOn(ctx, verb, c, key, now, cost, maxWait)
}

// verbOn is verb on c's keys of key (c the policy's compiled form, or
// PeekLimits' of one limit).
func (s *redisStore) verbOn(ctx context.Context, verb string, c *compiled, key string, now time.Time, cost, maxWait int64) (core.Decision, error) {
	p := c.p
	if verb == "Peek" && p.Algorithm == core.SlidingWindowLog {
		return s.peekLog(ctx, c, key, now, cost)
	}
	vs := verbs[p.Algorithm]
	sc := map[string]*script{"Peek": vs.peek, "Charge": vs.charge, "Refund": vs.refund, "Reserve": vs.reserve}[verb]
	if sc == nil {
		return core.Decision{Policy: p.Name}, fmt.Errorf("%w: redisstore: %s under the %s algorithm", core.ErrUnsupported, verb, p.Algorithm)
	}
	tail := s.verbTail(c)
	if c.cal != nil {
		tail = c.calendarArgs(tail, now.UnixMicro()).tail
	}
	args := s.args(c, tail, key, now, cost)
	args[1] = sc.shaArg
	if verb != "Peek" && verb != "Reserve" {
		args[3+len(c.suffixes)+1] = min(max(cost, 0), 2*c.maxEff+1)
	}
	if maxWait >= 0 {
		args = append(args, maxWait)
	}
	vals, err := sc.run(ctx, s.client, args)
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: policy %q: %s: %w", p.Name, verb, replyErr(err))
	}
	if len(vals) == 7 && vals[6] == 1 && vals[1] >= 0 && vals[1] < int64(len(p.Limits)) {
		// a reservation: admitted, at RetryAfter
		return core.Decision{
			Allowed:    true,
			Limit:      p.Limits[vals[1]],
			ResetAfter: time.Duration(vals[3]) * time.Microsecond,
			RetryAfter: time.Duration(vals[4]) * time.Microsecond,
			Policy:     p.Name,
		}, nil
	}
	d, err := decision(c, vals, false)
	d.ElasticRoom = false
	return d, err
}

// verbTail is the generic scripts' ARGV after now and cost for c's policy
// (see lua_generic.go), with the elastic mode "0": the verbs decide against
// the nominal limits.
func (s *redisStore) verbTail(c *compiled) []any {
	p := c.p
	cd := "0"
	if p.CountDenied {
		cd = "1"
	}
	tail := []any{cd, s.ttlPad, "0"}
	for i, l := range p.Limits {
		capa := capacity(l)
		eff := c.soft[i] + capa
		ce := eff
		if p.Elastic != nil {
			ce = capa * int64(p.Elastic.CeilingPercent) / 100
		}
		soft, softE := c.soft[i], c.softE[i]
		w := l.Window.Microseconds()
		switch p.Algorithm {
		case core.GCRA:
			t := core.EmissionInterval(l)
			tail = append(tail, t, eff*t, soft, ce*t, softE)
		case core.TokenBucket:
			tail = append(tail, core.EmissionInterval(l), eff, soft, ce-eff)
		case core.FixedWindow:
			tail = append(tail, w, eff, soft, fwModulus(ce), ce, softE, zero, zero, zero, zero, zero, zero)
		case core.SlidingWindowLog:
			tail = append(tail, w, eff, soft, ce, softE)
		case core.SlidingWindowCounter:
			n := int64(max(p.Buckets, 1))
			tail = append(tail, n, w/n, eff, soft, counterWidth(ce), ce, softE)
		}
	}
	return tail
}
