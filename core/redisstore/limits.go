package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/limitkit/limitkit/core"
)

// PeekLimits reads key's state under p limit by limit, consuming and
// writing nothing: one Decision per limit of p, in p.Limits' order, each
// that limit's alone (Limit, Remaining now, ResetAfter, and when a
// request of cost 1 would not pass it, Allowed false with the exact
// RetryAfter). Each limit is read by Peek's script on that limit's key
// only: one call, and a second (of cost 1) for a limit with nothing
// remaining; the sliding window log's ring is read and decided in Go as
// Peek's. core.Limiter.Usage calls it for a policy of several limits
// (core.Usage.Limits). Errors as Peek. Safe for concurrent use.
func (s *redisStore) PeekLimits(ctx context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error) {
	if p == nil {
		return nil, errors.New("redisstore: PeekLimits: nil policy")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := s.policy(p)
	if err != nil {
		return nil, err
	}
	out := make([]core.Decision, len(p.Limits))
	for i := range p.Limits {
		one := *p
		one.Limits, one.Shadow = p.Limits[i:i+1], false // shadow mode is the caller's
		ci, err := s.compile(&one)
		if err != nil {
			return nil, err
		}
		// limit i's key: its suffix under p names its index and parameters
		ci.suffixes = []string{c.suffixes[i]}
		d, err := s.verbOn(ctx, "Peek", ci, key, now, 0, -1)
		if err != nil {
			return nil, err
		}
		if d.Remaining == 0 {
			one, err := s.verbOn(ctx, "Peek", ci, key, now, 1, -1)
			if err != nil {
				return nil, err
			}
			if !one.Allowed {
				d.Allowed, d.RetryAfter = false, one.RetryAfter
			}
		}
		d.Limit, d.Policy = p.Limits[i], p.Name
		out[i] = d
	}
	return out, nil
}
