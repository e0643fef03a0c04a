package memstore

import (
	"context"
	"time"

	"github.com/limitkit/limitkit/core"
)

// PeekLimits reads key's state under p limit by limit, consuming and
// storing nothing: one Decision per limit of p, in p.Limits' order, each
// the report of that limit alone (core.Compiled.ReportTo of a policy of
// that one limit on its part of the state: Limit, Remaining now,
// ResetAfter, and when a request of cost 1 would not pass it, Allowed
// false with the exact RetryAfter). core.Limiter.Usage calls it for a
// policy of several limits (core.Usage.Limits). Errors as Take. Safe for
// concurrent use.
func (s *memStore) PeekLimits(_ context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error) {
	t, err := s.open(p)
	if err != nil {
		return nil, err
	}
	// one compiled policy per limit, laid out as the table's state is:
	// limit i's words follow limit i-1's
	tp := t.policy.Policy()
	parts := make([]*core.Compiled, len(tp.Limits))
	for i := range tp.Limits {
		one := *tp
		one.Limits, one.Shadow = tp.Limits[i:i+1], false // shadow mode is the caller's
		if parts[i], err = one.Compile(); err != nil {
			return nil, err
		}
	}
	st := make([]int64, t.words)
	h, sh := t.shardOf(s.seed, key)
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		copy(st, sh.state(t, i))
	}
	sh.mu.Unlock()
	us := now.UnixMicro()
	out := make([]core.Decision, len(parts))
	off := 0
	for i, c := range parts {
		w := c.StateWords()
		c.ReportTo(&out[i], st[off:off+w], us)
		out[i].Policy = p.Name
		off += w
	}
	return out, nil
}
