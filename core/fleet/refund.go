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

var _ storekit.Refunder = (*fleetStore)(nil)

// Refund gives cost back to key under p (see storekit.Refunder): what a
// core.CapacityLimit on the tier releases when an elastic take it found
// capacity for did not admit. For a policy decided in exact mode it is
// passed to the remote store, which must be a storekit.Refunder (the Redis
// store is), and it clears the key's deny-cache entry, which the refund
// may have made stale. A policy decided in write-back mode cannot be
// refunded (its units may be leased by other servers): an error, and the
// capacity is kept until it refills, conservatively.
func (s *fleetStore) Refund(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) error {
	if p == nil {
		return errors.New("fleet: Refund: nil policy")
	}
	if s.closed.Load() {
		return core.ErrClosed
	}
	pi, err := s.info(p)
	if err != nil {
		return err
	}
	r, ok := s.remote.(storekit.Refunder)
	switch {
	case pi.writeBack:
		return fmt.Errorf("fleet: policy %q is decided in write-back mode, whose leased units cannot be refunded; use mode exact for a capacity limit", p.Name)
	case !ok:
		return fmt.Errorf("fleet: the remote store %T cannot refund (storekit.Refunder)", s.remote)
	}
	if err := r.Refund(ctx, key, p, now, min(max(cost, 0), pi.maxCost)); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	sh.mu.Lock()
	if e := sh.m[ekey{p: p, key: key}]; e != nil {
		e.denyCost = 0
	}
	sh.mu.Unlock()
	return nil
}
