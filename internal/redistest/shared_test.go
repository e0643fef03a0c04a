package redistest

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestSharedCluster: every call returns the one cluster, ready; its nodes
// refuse to be stopped or frozen; KeyPrefix is stable per test and
// distinct across tests.
func TestSharedCluster(t *testing.T) {
	var first *Cluster
	var key string
	t.Run("a", func(t *testing.T) {
		first = SharedCluster(t)
		require.Len(t, first.Nodes, 3)
		c := first.NewClient(t)
		key = KeyPrefix(t) + "k"
		require.NoError(t, c.Set(context.Background(), key, "a", 0).Err())
		for _, n := range first.Nodes {
			info, err := n.Do("CLUSTER", "INFO")
			require.NoError(t, err)
			assert.Contains(t, info, "cluster_state:ok")
		}
	})
	t.Run("b", func(t *testing.T) {
		assert.Same(t, first, SharedCluster(t), "one cluster per test binary")
		assert.Equal(t, KeyPrefix(t), KeyPrefix(t), "the same test, the same prefix")
		assert.NotEqual(t, KeyPrefix(t), KeyPrefix(&testing.T{}), "another test, another prefix")
		for _, op := range []func(*Server){(*Server).Kill, (*Server).Stop, (*Server).Restart, (*Server).Pause, (*Server).Resume} {
			assert.Panics(t, func() { op(first.Nodes[0]) })
		}
		require.True(t, first.Nodes[0].Running())
		v, err := first.NewClient(t).Get(context.Background(), key).Result()
		require.NoError(t, err, "the cluster outlives the test that started it")
		assert.Equal(t, "a", v)
	})
}
