package redisstore

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// recoveryBound is how soon after a replica's promotion the dead
// master's keys must decide again (the bound; the store asks for
// a slot-map reload at most every reloadEvery, go-redis reloads at most
// every 200 ms).
const recoveryBound = 3 * time.Second

// TestRecoveryFollowsFailover: a Cluster master is killed (kill -9) or
// frozen (SIGSTOP) and its replica promoted (CLUSTER FAILOVER TAKEOVER);
// the store must send the victim's keys to the new master within
// recoveryBound of the promotion, although go-redis reloads the slot map
// unprompted only every ClusterStateReloadInterval (60 s here, its
// default). A dead address never answers MOVED: without the store's
// reload after a connection error or timeout, the keys fail for a minute.
// The set-up (loading the scripts, the first decisions, the other
// masters' keys) runs under test timeouts (redistest.StoreTimeout), not
// production's: on a loaded machine a fresh six-node cluster can take
// longer than the client's 500 ms read timeout to load the scripts, or
// than 50 ms to decide; the victim's keys are decided under 50 ms
// deadlines, as a Limiter's.
func TestRecoveryFollowsFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster")
	}
	for _, tc := range []struct {
		name string
		kill func(*redistest.Server)
	}{
		{"kill", func(s *redistest.Server) { s.Kill() }},
		{"pause", func(s *redistest.Server) { s.Pause() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := redistest.StartClusterWithReplicas(t)
			c, err := NewClient("redis://"+cl.Nodes[0].Addr+","+cl.Nodes[1].Addr+","+cl.Nodes[2].Addr,
				func(cfg *ClientConfig) { cfg.Cluster.ClusterStateReloadInterval = time.Minute })
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			cc := c.(*redis.ClusterClient)
			s := newStore(t, c)
			p := mustPolicy(t, core.Policy{Name: "failover", Limits: []core.Limit{core.PerMinute(1000)}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// the scripts are loaded through a client with test timeouts
			// (the store under test keeps production's: its slot-map
			// reloads on a frozen node are bounded by them)
			setup, err := NewClient("redis://"+cl.Nodes[0].Addr+","+cl.Nodes[1].Addr+","+cl.Nodes[2].Addr,
				func(cfg *ClientConfig) {
					cfg.Cluster.DialTimeout, cfg.Cluster.ReadTimeout, cfg.Cluster.WriteTimeout = redistest.StoreTimeout, redistest.StoreTimeout, redistest.StoreTimeout
				})
			require.NoError(t, err)
			t.Cleanup(func() { _ = setup.Close() })
			require.NoError(t, newStore(t, setup).Check(ctx))
			victim, replica := cl.Nodes[1], cl.Replicas[1]
			keys := keysOn(t, s, cc, p, victim, 5)
			others := keysOn(t, s, cc, p, cl.Nodes[0], 5)
			// decideWithin returns how many of keys decided within d each;
			// decide, within 50 ms each
			decideWithin := func(keys []string, d time.Duration) int {
				ok := 0
				for _, k := range keys {
					dctx, cancel := context.WithTimeout(context.Background(), d)
					if _, err := s.Take(dctx, k, p, time.Time{}, 1); err == nil {
						ok++
					}
					cancel()
				}
				return ok
			}
			decide := func(keys []string) int { return decideWithin(keys, 50*time.Millisecond) }
			require.Equal(t, len(keys), decideWithin(keys, redistest.StoreTimeout), "set-up: the victim's keys decide before the failure")

			tc.kill(victim)
			assert.Equal(t, 0, decide(keys), "the victim's keys fail while it is down")
			replica.Failover(t, "TAKEOVER")
			promoted := time.Now()
			var recovered time.Duration
			for time.Since(promoted) < recoveryBound+2*time.Second {
				if decide(keys) == len(keys) {
					recovered = time.Since(promoted)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.NotZero(t, recovered, "the victim's keys did not decide within %v of the promotion", recoveryBound+2*time.Second)
			t.Logf("%s: the victim's keys decide again %v after the promotion", tc.name, recovered.Round(time.Millisecond))
			assert.LessOrEqual(t, recovered, recoveryBound)
			assert.Equal(t, len(others), decideWithin(others, redistest.StoreTimeout), "the other masters' keys decide throughout")
		})
	}
}

// TestRecoveryAfterRestart measures how long decisions keep failing after
// a restarted Redis answers again, once the client's pool has seen more
// failed dials than its size: go-redis then dials only once a second
// until one succeeds (docs/redis.md states the bound of about 1 s). Each
// failure during the outage is a refused dial, reported at once.
func TestRecoveryAfterRestart(t *testing.T) {
	srv := redistest.StartNode(t)
	c, err := NewClient("redis://" + srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c)
	p := mustPolicy(t, core.Policy{Name: "restart", Limits: []core.Limit{core.PerMinute(1000)}})
	takeWithin := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := s.Take(ctx, "k", p, time.Time{}, 1)
		return err
	}
	take := func() error { return takeWithin(50 * time.Millisecond) }
	require.NoError(t, takeWithin(2*time.Second), "the first decision (loads the script)")
	srv.Kill()
	// a refused dial fails at once: one attempt (DialerRetries 1; go-redis's
	// default tries 5 times 100 ms apart), reported as a connection error.
	// Counted, not timed, and under a long deadline (2 s), so that a
	// loaded machine can neither fail it nor turn a refusal into a timeout.
	// Once PoolSize dials have failed the pool also re-dials in the
	// background, once a second: those may fall in a decision's window.
	dials := &dialCount{}
	c.(*redis.Client).AddHook(dials)
	for i := 0; i < 3*c.(*redis.Client).Options().PoolSize; i++ {
		before, start := dials.n.Load(), time.Now()
		err := takeWithin(2 * time.Second)
		background := 1 + int64(time.Since(start)/time.Second)
		require.Error(t, err)
		require.Equal(t, core.ErrorConnection, core.ClassifyError(err), "a refused dial fails at once: %v", err)
		require.LessOrEqual(t, dials.n.Load()-before, 1+background, "dial attempts in one decision's window: its own and the pool's background re-dials")
	}
	srv.Restart()
	back := time.Now()
	for take() != nil {
		require.Less(t, time.Since(back), 3*time.Second, "decisions still fail 3 s after Redis answers")
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(back)
	t.Logf("decisions fail for %v after Redis answers again", took.Round(time.Millisecond))
	assert.LessOrEqual(t, took, 1500*time.Millisecond, "go-redis re-dials once a second")
}

// dialCount counts a client's dial attempts (go-redis dials on a context
// of its own, so they cannot be told apart by the decision's).
type dialCount struct{ n atomic.Int64 }

func (d *dialCount) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (d *dialCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d *dialCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
