package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var _ storekit.SlotStore = (*fleetStore)(nil)

// AcquireSlot implements [storekit.SlotStore] by passing the call straight to
// the remote store (exact: no deny cache, no write-back, no breaker; a
// remote failure is the error, and core.Concurrency applies its fail
// mode). A remote store that does not implement storekit.SlotStore is an
// error here, on every call.
func (s *fleetStore) AcquireSlot(ctx context.Context, key string, p *core.ConcurrencyPolicy, token uint64, now time.Time) (int64, bool, error) {
	rs, ok := s.remote.(storekit.SlotStore)
	if !ok {
		return 0, false, fmt.Errorf("fleet: the remote store %T cannot hold in-flight slots (it does not implement storekit.SlotStore)", s.remote)
	}
	return rs.AcquireSlot(ctx, key, p, token, now)
}

// ReleaseSlot implements [storekit.SlotStore] by passing the call straight to
// the remote store, as AcquireSlot does.
func (s *fleetStore) ReleaseSlot(ctx context.Context, key string, p *core.ConcurrencyPolicy, token uint64) error {
	rs, ok := s.remote.(storekit.SlotStore)
	if !ok {
		return fmt.Errorf("fleet: the remote store %T cannot hold in-flight slots (it does not implement storekit.SlotStore)", s.remote)
	}
	return rs.ReleaseSlot(ctx, key, p, token)
}
