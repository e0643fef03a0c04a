package fleet

import (
	"strconv"
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestSourceCarryFleet: a change of an identity's limits carries its
// key's use through the fleet tier (exact mode, over Redis), every
// algorithm, as on the stores themselves (core's
// TestSourceCarryPerAlgorithm, redisstore's TestSourceCarryRedis).
func TestSourceCarryFleet(t *testing.T) {
	srv := redistest.StartNode(t)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			c := srv.NewClient(t)
			tier := newTier(t, redisStore(t, c, redisstore.WithPrefix("carry"+strconv.Itoa(int(alg))+":")))
			conformkit.SourceCarry(t, tier, alg)
		})
	}
}
