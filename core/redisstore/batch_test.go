package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTakeBatchEqualsTake: a batch over many keys and policies decides as
// the same takes one by one (on another prefix), on a node and on a
// Cluster (one pipeline per node), and counts one pipeline of commands.
// On the shared Cluster, on keys of its own.
func TestTakeBatchEqualsTake(t *testing.T) {
	t.Parallel()
	node := redistest.StartNode(t)
	cl := redistest.SharedCluster(t)
	pols := []*core.Policy{
		mustPolicy(t, core.Policy{Name: "g", Limits: []core.Limit{core.Per(3, time.Second)}}),
		mustPolicy(t, core.Policy{Name: "f2", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(9, time.Minute), core.Per(2, time.Second)}}),
		mustPolicy(t, core.Policy{Name: "l", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.Per(2, time.Second)}}),
	}
	for name, client := range map[string]redis.UniversalClient{"node": node.NewClient(t), "cluster": cl.NewClient(t)} {
		t.Run(name, func(t *testing.T) {
			batched := newStore(t, client, WithClientTime(), WithPrefix(redistest.KeyPrefix(t)+"b:"))
			single := newStore(t, client, WithClientTime(), WithPrefix(redistest.KeyPrefix(t)+"s:"))
			ctx := context.Background()
			var b []storekit.BatchTake
			for i := 0; i < 60; i++ {
				b = append(b, storekit.BatchTake{Key: string(rune('a' + i%7)), Policy: pols[i%3], Now: epoch.Add(time.Duration(i) * time.Millisecond), Cost: int64(i % 3)})
			}
			require.NoError(t, batched.TakeBatch(ctx, b))
			for i, e := range b {
				want, err := single.Take(ctx, e.Key, e.Policy, e.Now, e.Cost)
				require.NoError(t, err)
				require.NoError(t, e.Err)
				assert.Equal(t, want, e.Decision, "entry %d", i)
			}
		})
	}
}

// TestTakeBatchReloadsScripts: after SCRIPT FLUSH the batch is sent again
// as EVAL, and succeeds.
func TestTakeBatchReloadsScripts(t *testing.T) {
	s, c, _ := nodeStore(t)
	p := mustPolicy(t, core.Policy{Name: "r", Limits: []core.Limit{core.Per(5, time.Second)}})
	ctx := context.Background()
	b := []storekit.BatchTake{{Key: "k", Policy: p, Now: epoch, Cost: 1}, {Key: "k", Policy: p, Now: epoch, Cost: 1}}
	require.NoError(t, s.TakeBatch(ctx, b))
	require.NoError(t, c.ScriptFlush(ctx).Err())
	b = append(b, storekit.BatchTake{Key: "k", Policy: nil, Cost: 1})
	require.NoError(t, s.TakeBatch(ctx, b))
	assert.NoError(t, b[0].Err)
	assert.Equal(t, int64(1), b[1].Decision.Remaining, "four of five taken")
	assert.Error(t, b[2].Err, "a nil policy fails alone")
}

func TestTakeBatchAndPingFailures(t *testing.T) {
	s, _, srv := nodeStore(t)
	p := mustPolicy(t, core.Policy{Name: "x", Limits: []core.Limit{core.Per(5, time.Second)}})
	ctx := context.Background()
	require.NoError(t, s.Ping(ctx))
	srv.Pause()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	b := []storekit.BatchTake{{Key: "k", Policy: p, Now: epoch, Cost: 1}}
	err := s.TakeBatch(tctx, b)
	require.Error(t, err)
	assert.ErrorIs(t, b[0].Err, context.DeadlineExceeded)
	assert.ErrorIs(t, s.Ping(tctx), context.DeadlineExceeded)
	srv.Resume()
	assert.NoError(t, s.Ping(ctx))
}

func TestPingCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	s := newStore(t, cl.NewClient(t))
	require.NoError(t, s.Ping(context.Background()))
	cl.Nodes[1].Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	assert.Error(t, s.Ping(ctx), "every shard is pinged")
}
