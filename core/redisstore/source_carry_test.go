package redisstore

import (
	"strconv"
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestSourceCarryRedis: a change of an identity's limits carries its
// key's use to the new limits on the Redis store, every algorithm (the
// embedded store's: core's TestSourceCarryPerAlgorithm): raised 5 -> 10
// after 5 used, 5 more; cut 10 -> 5 after 3 used, 2 more; flapping
// between 10 and 20 admits 20 in the window.
func TestSourceCarryRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			store := newStore(t, srv.NewClient(t), WithClientTime(), WithPrefix("carry"+strconv.Itoa(int(alg))+":"))
			conformkit.SourceCarry(t, store, alg)
		})
	}
}
