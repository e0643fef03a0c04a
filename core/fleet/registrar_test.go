package fleet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestRegistryRedis: the tier forwards registrations to the Redis store,
// so one name with two limits fails at NewLimiter through it (issue 22).
func TestRegistryRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	for _, mode := range []Option{WithDefaultMode(core.ModeExact), WithDefaultMode(core.ModeWriteBack)} {
		storetest.RunRegistry(t, func(t *testing.T) core.Store {
			c := srv.NewClient(t)
			require.NoError(t, c.FlushAll(context.Background()).Err())
			return newTier(t, redisStore(t, c), mode)
		})
	}
}

// TestRegistryLocalFallback: a FailLocal policy registers its divided
// limits with the tier's embedded store at construction, and Release
// drops them.
func TestRegistryLocalFallback(t *testing.T) {
	s := newTier(t, newFake())
	p := core.Policy{Name: "fb", Limits: []core.Limit{core.PerMinute(100)}, FailMode: core.FailLocal, FleetSize: 4}
	l := core.MustNewLimiter(s, p)
	assert.Equal(t, 1, s.local.Registered())
	assert.Equal(t, 1, s.local.Stats().Policies)
	l.Release()
	assert.Equal(t, 0, s.local.Registered())
	assert.Equal(t, 0, s.local.Stats().Policies)
	assert.Empty(t, *s.policies.Load())
}

// TestElasticNeedsAnElasticRemote: an elastic policy over a remote store
// that cannot decide it fails at NewLimiter, not in TakeElastic.
func TestElasticNeedsAnElasticRemote(t *testing.T) {
	s := newTier(t, newFake())
	_, err := core.NewLimiter(s, core.Policy{Name: "el", Limits: []core.Limit{core.PerMinute(10)},
		Elastic: &core.Elastic{CeilingPercent: 200, Signal: core.LoadBelow{InFlight: &core.InFlight{}, Max: 10}}})
	require.ErrorContains(t, err, "does not implement storekit.ElasticStore")
}
