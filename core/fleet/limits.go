package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
)

// limitsPeeker is a remote store that reads a key's state limit by limit
// (the Redis store's PeekLimits).
type limitsPeeker interface {
	PeekLimits(ctx context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error)
}

// PeekLimits reads key's state under p limit by limit at the remote
// store (as its PeekLimits: one Decision per limit of p, in order),
// through the breaker of the key's failure domain as Peek. In write-back
// mode (WithSync) the units leased to this server and not yet spent count
// as remaining of every limit, as Peek's. A remote failure, or a remote
// store that cannot read limit by limit, is an error (no local figures:
// core.Limiter.Usage then reports the binding limit alone). Safe for
// concurrent use.
func (s *fleetStore) PeekLimits(ctx context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error) {
	_, pi, err := s.remoteVerbs("PeekLimits", p)
	if err != nil {
		return nil, err
	}
	lp, ok := s.remote.(limitsPeeker)
	if !ok {
		return nil, fmt.Errorf("%w: fleet: PeekLimits needs a remote store that reads limit by limit; %T does not", core.ErrUnsupported, s.remote)
	}
	var ds []core.Decision
	if err := s.remoteVerb(ctx, key, pi, func() (err error) {
		ds, err = lp.PeekLimits(ctx, key, p, now)
		return err
	}); err != nil {
		return nil, err
	}
	if pi.writeBack {
		if lease := s.leasedHere(key, pi, now.UnixMicro()); lease > 0 {
			for i := range ds {
				if ds[i].Allowed {
					ds[i].Remaining += lease
				}
			}
		}
	}
	return ds, nil
}
