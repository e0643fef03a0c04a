package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDomainIsTheKeysMaster: on a Cluster client, Domain names the master
// that serves the key's slot — the one whose CLUSTER NODES entry owns the
// slot of the key's Redis keys — for every key, spreading keys over all
// three masters; before the client has a slot map it returns "" without
// I/O; on a node client it is always "". On the shared Cluster, on keys
// of its own.
func TestDomainIsTheKeysMaster(t *testing.T) {
	t.Parallel()
	cl := redistest.SharedCluster(t)
	c := cl.NewClient(t)
	s := newStore(t, c, WithPrefix(redistest.KeyPrefix(t)))
	p := &core.Policy{Name: "dom", Limits: []core.Limit{core.PerMinute(5)}}
	assert.Empty(t, s.Domain("k", p), "no slot map yet: unknown, and no I/O")
	ctx := context.Background()
	_, err := s.Take(ctx, "k", p, time.Now(), 1) // loads the slot map
	require.NoError(t, err)
	seen := map[string]bool{}
	for i := 0; i < 60; i++ {
		key := fmt.Sprint("user-", i)
		d := s.Domain(key, p)
		require.NotEmpty(t, d)
		seen[d] = true
		keys, err := s.Keys(p, key)
		require.NoError(t, err)
		slot, err := c.ClusterKeySlot(ctx, keys[0]).Result()
		require.NoError(t, err)
		m, err := c.MasterForKey(ctx, keys[0])
		require.NoError(t, err)
		assert.Equal(t, m.Options().Addr, d, "key %s slot %d", key, slot)
	}
	assert.Len(t, seen, 3, "the keys spread over the three masters")
	assert.Empty(t, s.Domain("k", nil))

	node := redistest.StartNode(t)
	ns := newStore(t, node.NewClient(t))
	assert.Empty(t, ns.Domain("k", p), "a node is one domain")
}
