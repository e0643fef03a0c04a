package rules

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestLiveRefusesNameOfOtherLimits (issue 22, item 1): a rules set whose
// rule name another live Limiter on the store holds with other limits is
// refused by the load (NewLive) and by a reload (Swap), which leaves the
// current set serving and nothing registered; once the other Limiter is
// released, the reload applies.
func TestLiveRefusesNameOfOtherLimits(t *testing.T) {
	srv := redistest.StartNode(t)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) core.Store
	}{
		{"memstore", func(t *testing.T) core.Store {
			s := memstore.MustNew()
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"redis", func(t *testing.T) core.Store {
			s, err := redisstore.New(srv.NewClient(t), redisstore.WithClientTime())
			require.NoError(t, err)
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tc.store(t)
			other := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(5)}})
			set := mustParse(t, "rules:\n  - {name: web, route: /web, limits: [\"10 per 1m\"]}\n  - {name: api, route: /api, limits: [\"10 per 1m\"]}\n")
			_, err := NewLive[struct{}](store, set, nil)
			require.ErrorContains(t, err, `rules: policy "api": core: policy name "api" is already used on this store by a policy of other limits (gcra 5 per 1m; this one: gcra 10 per 1m)`)

			// redistest.StoreTimeout: a loaded CI machine must not turn
			// the Redis answer into an i/o timeout (seen at load 16)
			live, err := NewLive[struct{}](store, mustParse(t, "rules:\n  - {name: web, route: /web, limits: [\"10 per 1m\"]}\n"), nil, core.WithTimeout(redistest.StoreTimeout))
			require.NoError(t, err)
			_, err = live.Swap(set)
			require.ErrorContains(t, err, `policy name "api" is already used`)
			assert.Equal(t, uint64(1), live.Generation(), "the current set keeps serving")

			other.Release()
			ch, err := live.Swap(set)
			require.NoError(t, err, "the name is free once released")
			assert.Equal(t, []string{"api"}, ch.Added)
			snap := live.Acquire()
			defer snap.Release()
			d, err := snap.Limiter(snap.Set().Match("GET", "/api", false)).Allow(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, int64(9), d.Remaining)
		})
	}
}

// TestLiveFailedSwapReleasesWhatItBuilt: a reload rejected halfway leaves
// no registration behind (memstore's count stays that of the set serving).
func TestLiveFailedSwapReleasesWhatItBuilt(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	live, err := NewLive[struct{}](store, mustParse(t, "rules:\n  - {name: web, route: /web, limits: [\"10 per 1m\"]}\n"), nil)
	require.NoError(t, err)
	other := core.MustNewLimiter(store, core.Policy{Name: "zz", Limits: []core.Limit{core.PerMinute(5)}})
	defer other.Release()
	for range 5 {
		_, err = live.Swap(mustParse(t, "rules:\n  - {name: new1, route: /a, limits: [\"1 per 1m\"]}\n  - {name: new2, route: /b, limits: [\"1 per 1m\"]}\n  - {name: zz, route: /c, limits: [\"1 per 1m\"]}\n"))
		require.Error(t, err)
	}
	assert.Equal(t, 2, store.Registered(), "web and zz")
	assert.Equal(t, 2, store.Stats().Policies)
}
