package redisstore

import (
	"context"
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/stretchr/testify/require"
)

// The conformance runs are parallel tests: each on a node of its own or
// on keys of its own (redistest.KeyPrefix) on the shared Cluster, with no
// wall-clock bound, they run beside one another once the package's
// sequential tests are done.

// TestConformanceNode runs the store conformance suite against a single
// node, with eight store instances (each with its own client) sharing the
// exactness test's key.
func TestConformanceNode(t *testing.T) {
	t.Parallel()
	conformanceNode(t)
}

// TestConformanceCluster runs the suite against a three-master Cluster.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	conformanceCluster(t)
}

// TestConformancePipelined runs the suite on a node and on a Cluster with
// WithPipelining.
func TestConformancePipelined(t *testing.T) {
	t.Parallel()
	t.Run("node", func(t *testing.T) { conformanceNode(t, WithPipelining(Pipelining{})) })
	t.Run("cluster", func(t *testing.T) { conformanceCluster(t, WithPipelining(Pipelining{})) })
}

func conformanceNode(t *testing.T, opts ...Option) {
	srv := redistest.StartNode(t)
	storetest.Run(t, func(t *testing.T) core.Store {
		c := srv.NewClient(t)
		require.NoError(t, c.FlushAll(context.Background()).Err())
		return newStore(t, c, append([]Option{WithClientTime()}, opts...)...)
	}, storetest.Options{Stores: 8, Goroutines: 800, Calls: 4, Steps: 300})
}

// conformanceCluster runs the suite on the shared Cluster: each subtest's
// stores (the exactness test's eight share it) keep to the subtest's
// KeyPrefix, so each starts on empty state, as on a flushed cluster.
func conformanceCluster(t *testing.T, opts ...Option) {
	cl := redistest.SharedCluster(t)
	storetest.Run(t, func(t *testing.T) core.Store {
		return newStore(t, cl.NewClient(t), append([]Option{WithClientTime(), WithPrefix(redistest.KeyPrefix(t))}, opts...)...)
	}, storetest.Options{Stores: 8, Goroutines: 800, Calls: 4, Steps: 300})
}

// TestVerbsConformanceNode runs the verbs' suite on a node, two store
// instances (each with its own client) sharing it.
func TestVerbsConformanceNode(t *testing.T) {
	t.Parallel()
	srv := redistest.StartNode(t)
	storetest.RunVerbs(t, func(t *testing.T) core.Store {
		return newStore(t, srv.NewClient(t), WithClientTime())
	}, storetest.VerbOptions{Stores: 2})
}

// TestVerbsConformanceCluster runs the verbs' suite on a three-master
// Cluster, two store instances sharing it.
func TestVerbsConformanceCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.SharedCluster(t)
	storetest.RunVerbs(t, func(t *testing.T) core.Store {
		return newStore(t, cl.NewClient(t), WithClientTime(), WithPrefix(redistest.KeyPrefix(t)))
	}, storetest.VerbOptions{Stores: 2})
}
