package fleet

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/core/storetest"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// redisStore builds a client-time Redis store over c.
func redisStore(t testing.TB, c redis.UniversalClient, opts ...redisstore.Option) fullRedis {
	t.Helper()
	s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithClientTime()}, opts...)...)
	require.NoError(t, err)
	return s.(fullRedis)
}

// TestConformanceExactNode runs the conformance suite against the tier in
// exact mode over a real Redis node, eight tiers (each with its own
// client) sharing the exactness test's key.
func TestConformanceExactNode(t *testing.T) {
	srv := redistest.StartNode(t)
	storetest.Run(t, func(t *testing.T) core.Store {
		c := srv.NewClient(t)
		require.NoError(t, c.FlushAll(context.Background()).Err())
		return newTier(t, redisStore(t, c))
	}, storetest.Options{Stores: 8, Goroutines: 800, Calls: 4, Steps: 300})
}

// TestConformanceExactCluster runs the suite over a three-master Cluster.
func TestConformanceExactCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	storetest.Run(t, func(t *testing.T) core.Store {
		c := cl.NewClient(t)
		require.NoError(t, c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
			return m.FlushAll(ctx).Err()
		}))
		return newTier(t, redisStore(t, c))
	}, storetest.Options{Stores: 8, Goroutines: 800, Calls: 4, Steps: 300})
}

// TestExactEqualsPlainRedis is the differential test of exact mode: the
// same random (time, cost) sequence, on several keys, through the tier
// (sync 0: exact, with its deny cache) and through the plain Redis store
// on another prefix of the same server, both at the same client time from
// one core.ManualClock: every decision is equal, for every policy of the
// conformance suite, on a node and on the Cluster, while the tier sends
// fewer commands (denials served from the deny cache).
func TestExactEqualsPlainRedis(t *testing.T) {
	node := redistest.StartNode(t)
	cl := redistest.StartCluster(t)
	for _, target := range []string{"node", "cluster"} {
		t.Run(target, func(t *testing.T) {
			cnt := &cmdCounter{}
			var c, tc redis.UniversalClient
			if target == "node" {
				c = node.NewClient(t)
				tnc := node.NewClient(t)
				tnc.AddHook(cnt)
				tc = tnc
			} else {
				c = cl.NewClient(t)
				tcc := cl.NewClient(t)
				tcc.AddHook(cnt)
				tc = tcc
			}
			plain := redisStore(t, c, redisstore.WithPrefix("plain:"))
			clk := core.NewManualClock(conformkit.Epoch)
			tier := newTier(t, redisStore(t, tc, redisstore.WithPrefix("tier:")), WithClock(clk), WithSync(0))
			ctx := context.Background()
			var calls, cached int64
			for _, p := range conformkit.Policies() {
				t.Run(p.Name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(len(p.Name)), 11))
					for i := 0; i < 400; i++ {
						switch rng.IntN(4) {
						case 0:
							clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
						case 1:
							clk.Advance(time.Duration(rng.IntN(2000)) * time.Microsecond)
						}
						key := []string{"a", "b", "c"}[rng.IntN(3)]
						cost := int64(1 + rng.IntN(2))
						if rng.IntN(12) == 0 {
							cost = int64(rng.IntN(4))
						}
						now := clk.Now()
						want, err := plain.Take(ctx, key, &p, now, cost)
						require.NoError(t, err)
						got, err := tier.Take(ctx, key, &p, now, cost)
						require.NoError(t, err)
						if got.Cached {
							cached++
							got.Cached = false // where the denial came from, not what it is
						}
						require.Equal(t, want, got, "step %d key %s cost %d", i, key, cost)
						calls++
					}
				})
			}
			t.Logf("%s: %d decisions, %d tier commands to Redis, %d cached denials", target, calls, cnt.n.Load(), cached)
			require.Less(t, cnt.n.Load(), calls, "the deny cache saved round trips")
			require.Positive(t, cached, "a cached denial says so")
		})
	}
}

// TestWriteBackBoundRedis runs the write-back bound check (checkBound)
// over a real Redis node and over the three-master Cluster, for every
// policy of the conformance suite.
func TestWriteBackBoundRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	cl := redistest.StartCluster(t)
	for _, target := range []string{"node", "cluster"} {
		for _, p := range conformkit.Policies() {
			if p.Shadow {
				continue
			}
			t.Run(target+"/"+p.Name, func(t *testing.T) {
				checkBound(t, p, 8*time.Second, func(t *testing.T) storekit.BatchStore {
					if target == "node" {
						return redisStore(t, srv.NewClient(t), redisstore.WithPrefix(t.Name()+":"))
					}
					return redisStore(t, cl.NewClient(t), redisstore.WithPrefix(t.Name()+":"))
				})
			})
		}
	}
}

// TestVerbsConformanceRedis runs the verbs' suite through four tiers in
// exact mode in front of one Redis node, and of a Cluster: a reset
// through one tier is honoured by the others within the deny cache's
// bound.
func TestVerbsConformanceRedis(t *testing.T) {
	node := redistest.StartNode(t)
	cl := redistest.StartCluster(t)
	for _, target := range []string{"node", "cluster"} {
		t.Run(target, func(t *testing.T) {
			storetest.RunVerbs(t, func(t *testing.T) core.Store {
				var c redis.UniversalClient = node.NewClient(t)
				if target == "cluster" {
					c = cl.NewClient(t)
				}
				return newTier(t, redisStore(t, c))
			}, storetest.VerbOptions{Stores: 4, ResetBound: defaultDenyCacheTTL})
		})
	}
}
