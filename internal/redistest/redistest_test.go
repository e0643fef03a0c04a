package redistest

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNodeLifecycle(t *testing.T) {
	s := StartNode(t)
	require.NotEqual(t, 6379, s.Port)
	c := s.NewClient(t)
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

	// Paused: the connection is accepted but nothing answers before the deadline.
	s.Pause()
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := c.Get(pctx, "k").Err()
	cancel()
	require.Error(t, err)
	s.Resume()
	require.NoError(t, c.Ping(ctx).Err())

	// Killed: refused; restarted: empty (persistence is off) and answering.
	s.Kill()
	require.False(t, s.Running())
	_, err = s.Do("PING")
	require.Error(t, err)
	s.Restart()
	require.True(t, s.Running())
	v, err := s.Do("EXISTS", "k")
	require.NoError(t, err)
	require.Equal(t, "0", v)

	s.Stop()
	require.False(t, s.Running())
}

func TestNodePersistenceOff(t *testing.T) {
	s := StartNode(t)
	c := s.NewClient(t)
	m, err := c.ConfigGet(context.Background(), "*").Result()
	require.NoError(t, err)
	require.Equal(t, "", m["save"])
	require.Equal(t, "no", m["appendonly"])
	require.Equal(t, "127.0.0.1", m["bind"])
}

func TestCluster(t *testing.T) {
	cl := StartCluster(t)
	require.Len(t, cl.Nodes, 3)
	c := cl.NewClient(t)
	ctx := context.Background()
	masters := map[string]bool{}
	for i := 0; i < 50; i++ {
		k := "key" + strconv.Itoa(i)
		require.NoError(t, c.Set(ctx, k, i, 0).Err())
		n, err := c.MasterForKey(ctx, k)
		require.NoError(t, err)
		masters[n.Options().Addr] = true
	}
	require.Len(t, masters, 3, "keys spread over the three masters")
	for _, n := range cl.Nodes {
		info, err := n.Do("CLUSTER", "INFO")
		require.NoError(t, err)
		require.Contains(t, info, "cluster_state:ok")
	}
}

// TestServerBinary: the helpers start the binary LIMITKIT_REDIS_SERVER
// names (CI's second run uses valkey-server), and say which (the CI log
// shows it with -v).
func TestServerBinary(t *testing.T) {
	s := StartNode(t)
	v, err := s.Version()
	require.NoError(t, err)
	t.Logf("redistest: %s is %s", ServerBinary(), v)
	want := "redis "
	if strings.HasPrefix(filepath.Base(ServerBinary()), "valkey") {
		want = "valkey "
	}
	require.True(t, strings.HasPrefix(v, want), "%s reports %q", ServerBinary(), v)
}
