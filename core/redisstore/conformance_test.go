package redisstore

import (
	"context"
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/limitkit/limitkit/internal/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestConformanceNode runs the store conformance suite against a single
// node, with eight store instances (each with its own client) sharing the
// exactness test's key.
func TestConformanceNode(t *testing.T) {
	srv := redistest.StartNode(t)
	storetest.Run(t, func(t *testing.T) core.Store {
		c := srv.NewClient(t)
		require.NoError(t, c.FlushAll(context.Background()).Err())
		return newStore(t, c, WithClientTime())
	}, storetest.Options{Stores: 8, Goroutines: 800, Calls: 4, Steps: 300})
}

// TestConformanceCluster runs the suite against a three-master Cluster.
func TestConformanceCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	storetest.Run(t, func(t *testing.T) core.Store {
		c := cl.NewClient(t)
		require.NoError(t, c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
			return m.FlushAll(ctx).Err()
		}))
		return newStore(t, c, WithClientTime())
	}, storetest.Options{Stores: 8, Goroutines: 800, Calls: 4, Steps: 300})
}

// TestVerbsConformanceNode runs the verbs' suite on a node, two store
// instances (each with its own client) sharing it.
func TestVerbsConformanceNode(t *testing.T) {
	srv := redistest.StartNode(t)
	storetest.RunVerbs(t, func(t *testing.T) core.Store {
		return newStore(t, srv.NewClient(t), WithClientTime())
	}, storetest.VerbOptions{Stores: 2})
}

// TestVerbsConformanceCluster runs the verbs' suite on a three-master
// Cluster, two store instances sharing it.
func TestVerbsConformanceCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	storetest.RunVerbs(t, func(t *testing.T) core.Store {
		return newStore(t, cl.NewClient(t), WithClientTime())
	}, storetest.VerbOptions{Stores: 2})
}
