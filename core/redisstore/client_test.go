package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

func TestNewClientURLs(t *testing.T) {
	closeLater := func(c redis.UniversalClient) { t.Cleanup(func() { _ = c.Close() }) }
	t.Run("node", func(t *testing.T) {
		c, err := NewClient("rediss://u:p%40ss@cache.example:6380/2?pool_size=7&read_timeout=2s")
		require.NoError(t, err)
		closeLater(c)
		n, ok := c.(*redis.Client)
		require.True(t, ok, "%T", c)
		o := n.Options()
		assert.Equal(t, "cache.example:6380", o.Addr)
		assert.Equal(t, []any{"u", "p@ss", 2, 7}, []any{o.Username, o.Password, o.DB, o.PoolSize})
		require.NotNil(t, o.TLSConfig)
		assert.Equal(t, "cache.example", o.TLSConfig.ServerName)
		assert.True(t, o.ContextTimeoutEnabled)
		assert.Equal(t, 0, o.MaxRetries, "-1 normalized: no retries")
		assert.Equal(t, time.Duration(0), o.MinRetryBackoff)
		assert.Equal(t, 1, o.DialerRetries)
		assert.Equal(t, clientDialTimeout, o.DialTimeout)
		assert.Equal(t, 2*time.Second, o.ReadTimeout, "the URL's timeout wins")
		assert.Equal(t, clientReadTimeout, o.WriteTimeout)
		_, err = newRedis(c)
		assert.NoError(t, err)
	})
	t.Run("cluster", func(t *testing.T) {
		for _, u := range []string{"redis://a:1,b:2,c:3", "redis://:pw@a:1,b:2,c:3/?dial_timeout=1s", "redis://a:1,b:2,c:3/0", "redis://a:1?addr=b:2&addr=c:3"} {
			c, err := NewClient(u)
			require.NoError(t, err, u)
			closeLater(c)
			cc, ok := c.(*redis.ClusterClient)
			require.True(t, ok, "%s: %T", u, c)
			o := cc.Options()
			assert.ElementsMatch(t, []string{"a:1", "b:2", "c:3"}, o.Addrs, u)
			assert.True(t, o.ContextTimeoutEnabled)
			assert.Equal(t, clientClusterReloadInterval, o.ClusterStateReloadInterval)
			assert.Equal(t, 1, o.DialerRetries)
		}
		c, err := NewClient("rediss+cluster://user:pw@seed:7000")
		require.NoError(t, err)
		closeLater(c)
		o := c.(*redis.ClusterClient).Options()
		assert.Equal(t, []string{"seed:7000"}, o.Addrs)
		assert.Equal(t, []string{"user", "pw"}, []string{o.Username, o.Password})
		assert.NotNil(t, o.TLSConfig)
	})
	t.Run("sentinel", func(t *testing.T) {
		c, err := NewClient("redis://s1:26379,s2:26379/1?master_name=mymaster&password=secret")
		require.NoError(t, err)
		closeLater(c)
		_, ok := c.(*redis.Client)
		assert.True(t, ok, "%T", c)
		_, err = newRedis(c)
		assert.NoError(t, err, "ContextTimeoutEnabled is set")
	})
	t.Run("option", func(t *testing.T) {
		c, err := NewClient("redis://a:1", func(cfg *ClientConfig) { cfg.Node.PoolSize = 3 })
		require.NoError(t, err)
		closeLater(c)
		assert.Equal(t, 3, c.(*redis.Client).Options().PoolSize)
		_, err = NewClient("redis://a:1", func(cfg *ClientConfig) { cfg.Node = nil })
		assert.ErrorContains(t, err, "exactly one")
	})
	t.Run("unix", func(t *testing.T) {
		c, err := NewClient("unix:///run/redis.sock?db=1")
		require.NoError(t, err)
		closeLater(c)
		o := c.(*redis.Client).Options()
		assert.Equal(t, []any{"unix", "/run/redis.sock", 1, 1}, []any{o.Network, o.Addr, o.DB, o.DialerRetries})
	})
	t.Run("url wins", func(t *testing.T) {
		c, err := NewClient("redis://a:1?max_retries=2&dial_timeout=2s")
		require.NoError(t, err)
		closeLater(c)
		o := c.(*redis.Client).Options()
		assert.Equal(t, []any{2, 2 * time.Second, true}, []any{o.MaxRetries, o.DialTimeout, o.ContextTimeoutEnabled})
	})
	for _, bad := range []string{"a:1", "http://a:1", "redis://a:1,,b:2", "redis://a:1,b", "redis://a:1,b:2/3", "redis://a:1/x",
		"redis://a:1?bogus=1", "redis://u:hunter2@a:port", "redis://u:hunter2@a:1/x"} {
		_, err := NewClient(bad)
		assert.ErrorContains(t, err, "redisstore: NewClient", bad)
		if err != nil {
			assert.NotContains(t, err.Error(), "hunter2", "no password in errors")
		}
	}
}

// TestNewClientRefusedDialFailsFast: with NewClient's settings a refused
// dial fails at once and says so (kind connection), on a node and on a
// Cluster's dead master; and the settings reach every node client of a
// Cluster.
func TestNewClientRefusedDialFailsFast(t *testing.T) {
	p := mustPolicy(t, core.Policy{Name: "fast", Limits: []core.Limit{core.PerMinute(10)}})
	// check: under a long deadline (a test timeout, so that a loaded
	// machine under -race can neither fail it nor turn a refusal into a
	// timeout) the failure says connection and costs one dial attempt to
	// the dead address, counted by dials, not timed (go-redis's default
	// dials 5 times 100 ms apart). Once PoolSize dials have failed the pool
	// also re-dials in the background once a second: those may fall in a
	// decision's window; on a Cluster, so may the slot-map reload the
	// store asks for after a connection error (go-redis asks nodes in
	// random order, the dead master among them): extra dials per decision.
	check := func(t *testing.T, s *redisStore, key string, dials *dialCount, extra int64) {
		t.Helper()
		for try := range 2 { // the second after a failure
			ctx, cancel := context.WithTimeout(context.Background(), redistest.StoreTimeout)
			before, start := dials.n.Load(), time.Now()
			_, err := s.Take(ctx, key, p, epoch, 1)
			// re-dials at most once a second: a window of d holds at
			// most floor(d/1s)+1 of them, however short d is
			background := int64(time.Since(start)/time.Second) + 1
			cancel()
			require.Error(t, err)
			assert.Equal(t, "connection", core.ClassifyError(err), "try %d: %v", try, err)
			assert.LessOrEqual(t, dials.n.Load()-before, 1+extra+background, "try %d: a refused dial is not retried", try)
		}
	}
	t.Run("node", func(t *testing.T) {
		srv := redistest.StartNode(t)
		c, err := NewClient("redis://" + srv.Addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		s := newStore(t, c, WithClientTime())
		dials := &dialCount{}
		c.(*redis.Client).AddHook(dials)
		srv.Kill()
		check(t, s, "k", dials, 0)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		c, err := NewClient("redis://" + cl.Nodes[0].Addr + "," + cl.Nodes[1].Addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		cc := c.(*redis.ClusterClient)
		s := newStore(t, c, WithClientTime())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Check(ctx))
		var nodes atomic.Int64
		require.NoError(t, cc.ForEachShard(ctx, func(_ context.Context, n *redis.Client) error {
			nodes.Add(1)
			o := n.Options()
			if o.MinRetryBackoff != 0 || o.MaxRetries != 0 || o.DialerRetries != 1 || !o.ContextTimeoutEnabled {
				return errors.New("node " + o.Addr + " lacks NewClient's settings")
			}
			return nil
		}))
		assert.Equal(t, int64(3), nodes.Load())
		key := keysOn(t, s, cc, p, cl.Nodes[2], 1)[0]
		keys, err := s.Keys(p, key)
		require.NoError(t, err)
		dead, err := cc.MasterForKey(ctx, keys[0])
		require.NoError(t, err)
		dials := &dialCount{}
		dead.AddHook(dials)
		cl.Nodes[2].Kill()
		check(t, s, key, dials, 1)
	})
}

// keysOn returns n keys whose state p keeps on srv's slots, as cc's
// slot map has it now.
func keysOn(t *testing.T, s *redisStore, cc *redis.ClusterClient, p *core.Policy, srv *redistest.Server, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []string
	for i := 0; len(out) < n && i < 100*n; i++ {
		key := fmt.Sprintf("user-%d", i)
		keys, err := s.Keys(p, key)
		require.NoError(t, err)
		m, err := cc.MasterForKey(ctx, keys[0])
		require.NoError(t, err)
		if m.Options().Addr == srv.Addr {
			out = append(out, key)
		}
	}
	require.Len(t, out, n, "keys on %s", srv.Addr)
	return out
}

// TestNewClientSentinel: a Sentinel URL gives a client of the master the
// Sentinel names, which the store checks and decides on.
func TestNewClientSentinel(t *testing.T) {
	master := redistest.StartNode(t)
	sentinel := redistest.StartSentinel(t, master, "mymaster")
	c, err := NewClient("redis://" + sentinel.Addr + "?master_name=mymaster")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c, WithLogger(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Check(ctx))
	p := mustPolicy(t, core.Policy{Name: "sentinel", Limits: []core.Limit{core.PerMinute(10)}})
	d, err := s.Take(ctx, "k", p, epoch, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(9), d.Remaining)
	n, err := master.Do("DBSIZE")
	require.NoError(t, err)
	assert.Equal(t, "1", n, "the decision's key is on the master the Sentinel names")
}
