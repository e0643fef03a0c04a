package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// slotClients returns, per deployment (a node, the shared Cluster), a
// function making a new client: each limiter instance gets its own, as a
// process of its own would.
func slotClients(t *testing.T) map[string]func() redis.UniversalClient {
	node := redistest.StartNode(t)
	cl := redistest.SharedCluster(t)
	return map[string]func() redis.UniversalClient{
		"node":    func() redis.UniversalClient { return node.NewClient(t) },
		"cluster": func() redis.UniversalClient { return cl.NewClient(t) },
	}
}

// TestConcurrencyRedisExact: 48 goroutines over 4 limiter instances (each
// its own client and store, as separate processes), asking at once while
// nobody releases, get exactly Max slots, on a node and on a Cluster;
// then, hammering with releases, never more than Max run at once, and
// every slot is back at the end.
func TestConcurrencyRedisExact(t *testing.T) {
	for name, newClient := range slotClients(t) {
		t.Run(name, func(t *testing.T) {
			prefix := redistest.KeyPrefix(t)
			p := core.ConcurrencyPolicy{Name: "exports", Max: 3}
			var cs []*core.Concurrency
			for i := 0; i < 4; i++ {
				st := newStore(t, newClient(), WithPrefix(prefix))
				c, err := core.NewConcurrency(st, p, core.WithTimeout(5*time.Second))
				require.NoError(t, err)
				cs = append(cs, c)
			}
			ctx := context.Background()
			for round := 0; round < 2; round++ {
				var mu sync.Mutex
				var rels []core.Slot
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := 0; g < 48; g++ {
					wg.Add(1)
					go func(c *core.Concurrency) {
						defer wg.Done()
						<-start
						rel, d, err := c.Acquire(ctx, "user-1")
						assert.NoError(t, err)
						if d.Allowed {
							mu.Lock()
							rels = append(rels, rel)
							mu.Unlock()
						}
					}(cs[g%4])
				}
				close(start)
				wg.Wait()
				require.Len(t, rels, 3, "round %d", round)
				for _, r := range rels {
					r.Release()
				}
			}
			var running, peak, admitted atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func(c *core.Concurrency) {
					defer wg.Done()
					for i := 0; i < 40; i++ {
						rel, d, err := c.Acquire(ctx, "user-2")
						assert.NoError(t, err)
						if !d.Allowed {
							continue
						}
						admitted.Add(1)
						n := running.Add(1)
						for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
						}
						running.Add(-1)
						rel.Release()
					}
				}(cs[g%4])
			}
			wg.Wait()
			assert.LessOrEqual(t, peak.Load(), int64(3))
			assert.Positive(t, admitted.Load())
			for i := 0; i < 3; i++ {
				_, d, err := cs[i].Acquire(ctx, "user-2")
				require.NoError(t, err)
				require.True(t, d.Allowed, "slot %d leaked", i)
			}
			_, d, _ := cs[3].Acquire(ctx, "user-2")
			assert.False(t, d.Allowed)
		})
	}
}

// TestConcurrencyRedisLease: on the store's clock (WithClientTime and a
// manual clock), a holder that never releases frees its slot exactly at
// the end of its lease, and a renewed holder keeps it.
func TestConcurrencyRedisLease(t *testing.T) {
	for name, newClient := range slotClients(t) {
		t.Run(name, func(t *testing.T) {
			prefix := redistest.KeyPrefix(t)
			clk := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			p := core.ConcurrencyPolicy{Name: "lease", Max: 1, Lease: 5 * time.Second}
			mk := func() *core.Concurrency {
				c, err := core.NewConcurrency(newStore(t, newClient(), WithPrefix(prefix), WithClientTime()), p, core.WithClock(clk), core.WithTimeout(5*time.Second))
				require.NoError(t, err)
				return c
			}
			crashed, other := mk(), mk()
			ctx := context.Background()
			_, d, err := crashed.Acquire(ctx, "k")
			require.NoError(t, err)
			require.True(t, d.Allowed)
			clk.Advance(5*time.Second - time.Millisecond)
			_, d, _ = other.Acquire(ctx, "k")
			require.False(t, d.Allowed, "freed before the lease ended")
			clk.Advance(time.Millisecond)
			rel, d, _ := other.Acquire(ctx, "k")
			require.True(t, d.Allowed, "the crashed holder's slot did not come back at the end of its lease")
			rel.Release()
			_, d, _ = crashed.Acquire(ctx, "k")
			require.True(t, d.Allowed)

			// renewal at the store: the same token moves its expiry
			st := newStore(t, newClient(), WithPrefix(prefix), WithClientTime())
			at := clk.Now().Add(time.Hour)
			_, ok, err := st.AcquireSlot(ctx, "r", &p, 7, at)
			require.NoError(t, err)
			require.True(t, ok)
			for i := 1; i <= 6; i++ {
				n, ok, err := st.AcquireSlot(ctx, "r", &p, 7, at.Add(time.Duration(i)*2*time.Second))
				require.NoError(t, err)
				require.True(t, ok, "a renewal was refused at Max")
				require.Equal(t, int64(1), n)
			}
			_, ok, _ = st.AcquireSlot(ctx, "r", &p, 8, at.Add(16*time.Second))
			require.False(t, ok, "a renewed holder lost its slot")
			_, ok, _ = st.AcquireSlot(ctx, "r", &p, 8, at.Add(17*time.Second))
			require.True(t, ok)
		})
	}
}

// TestConcurrencyRedisCrashedStore: on Redis TIME, slots held through a
// client that is closed without releasing (a process killed) come back
// within the lease; right after, they are still held.
func TestConcurrencyRedisCrashedStore(t *testing.T) {
	srv := redistest.StartNode(t)
	p := core.ConcurrencyPolicy{Name: "crash", Max: 2, Lease: time.Second}
	dead := srv.NewClient(t)
	crashed, err := core.NewConcurrency(newStore(t, dead), p, core.WithTimeout(5*time.Second))
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		_, d, err := crashed.Acquire(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.NoError(t, dead.Close())
	live, err := core.NewConcurrency(newStore(t, srv.NewClient(t)), p, core.WithTimeout(5*time.Second))
	require.NoError(t, err)
	// the slots are held until the lease ends: the deny below runs before
	// it unless the host stalls a whole second, when it is skipped
	start := time.Now()
	_, d, err := live.Acquire(ctx, "k")
	require.NoError(t, err)
	if time.Since(start) < 500*time.Millisecond {
		require.False(t, d.Allowed)
	}
	require.Eventually(t, func() bool {
		_, d, err := live.Acquire(ctx, "k")
		return err == nil && d.Allowed
	}, 20*time.Second, 50*time.Millisecond, "a dead client's slots never came back")
}
