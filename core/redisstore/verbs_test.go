package redisstore

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"
	"github.com/limitkit/limitkit/internal/redistest"
)

// verbRef applies a verb to the reference state with core's model.
func (r *ref) verb(v byte, key string, now time.Time, cost int64) core.Decision {
	st, ok := r.state[key]
	if !ok {
		st = make([]int64, r.p.StateWords())
		r.state[key] = st
	}
	c, err := r.p.Compile()
	if err != nil {
		panic(err)
	}
	return storetest.ApplyVerb(c, st, v, max(now.UnixMicro(), 0), cost, verbMaxWait.Microseconds())
}

const verbMaxWait = 5 * time.Second

func storeVerb(ctx context.Context, s *Store, v byte, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	switch v {
	case 'A':
		return s.Take(ctx, key, p, now, cost)
	case 'P':
		return s.Peek(ctx, key, p, now, cost)
	case 'C':
		return s.Charge(ctx, key, p, now, cost)
	case 'R':
		return s.Credit(ctx, key, p, now, cost)
	case 'W':
		return s.Reserve(ctx, key, p, now, cost, verbMaxWait)
	}
	return core.Decision{}, s.Reset(ctx, key, p)
}

// TestVerbsDifferential runs random sequences of every verb (and Take)
// through the Redis scripts and core's model, and requires identical
// decisions step by step, for every policy of the decision differential
// (every algorithm, one limit and several, soft, shadow, counted
// denials; the sliding log's Peek and Reset only), with huge costs.
func TestVerbsDifferential(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for i, pol := range diffPolicies() {
		verbs := "AAPCRWX"
		if pol.Algorithm == core.SlidingWindowLog {
			verbs = "AAPX" // Charge and Credit are not ported for the log
		}
		p := mustPolicy(t, pol)
		t.Run(p.Name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 24))
			r := newRef(p)
			w := p.Limits[len(p.Limits)-1].Window
			var offset time.Duration
			keys := []string{"alice", "bob"}
			seen := map[byte]int{}
			for step := 0; step < 500; step++ {
				switch x := rng.IntN(10); {
				case x < 3:
				case x < 8:
					offset += time.Duration(rng.Int64N(int64(w / 5)))
				default:
					offset += time.Duration(rng.Int64N(int64(2 * w)))
				}
				now := time.Now().Add(offset).Truncate(time.Microsecond)
				cost := rng.Int64N(8)
				if rng.IntN(20) == 0 {
					cost = math.MaxInt64 - rng.Int64N(2)
				}
				v := verbs[rng.IntN(len(verbs))]
				key := keys[rng.IntN(len(keys))]
				want := r.verb(v, key, now, cost)
				got, err := storeVerb(ctx, s, v, key, p, now, cost)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d %c key %s now %d cost %d", step, v, key, now.UnixMicro(), cost)
				seen[v]++
			}
			require.Len(t, seen, len(verbs)-1)
		})
	}
}

// TestVerbsClockBack: the verbs after the clock went back an hour, as
// core's model (a state from the future is normalized first).
func TestVerbsClockBack(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowCounter} {
		pol := core.Policy{Name: "back-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.PerSecond(4), core.PerMinute(30)}}
		if alg == core.SlidingWindowCounter {
			pol.Buckets = 2
		}
		p := mustPolicy(t, pol)
		r := newRef(p)
		t0 := time.Now().Truncate(time.Microsecond)
		for i, st := range []struct {
			v    byte
			at   time.Duration
			cost int64
		}{
			{'A', 0, 3}, {'C', 0, 5}, {'C', -time.Hour, 2}, {'R', -time.Hour, 1}, {'P', -time.Hour, 1},
			{'C', -time.Hour + time.Second, math.MaxInt64}, {'W', -time.Hour + time.Second, 1}, {'R', -time.Hour + 2*time.Second, math.MaxInt64},
		} {
			now := t0.Add(st.at)
			want := r.verb(st.v, "k", now, st.cost)
			got, err := storeVerb(ctx, s, st.v, "k", p, now, st.cost)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s step %d %c", alg, i, st.v)
		}
	}
}

// TestVerbsServerTimeAndCluster: on a Cluster, with Redis's clock, each
// verb is one round trip: a peek writes nothing, a reset restores the
// full quota, a charge past the limit is repaid before anything more is
// admitted, a refund never exceeds a fresh quota.
func TestVerbsServerTimeAndCluster(t *testing.T) {
	node := redistest.StartNode(t)
	cl := redistest.StartCluster(t)
	for name, client := range map[string]redis.UniversalClient{"node": node.NewClient(t), "cluster": cl.NewClient(t)} {
		t.Run(name, func(t *testing.T) {
			var n counter
			client.AddHook(&n)
			s := newStore(t, client)
			p := mustPolicy(t, core.Policy{Name: "c", Limits: []core.Limit{core.PerMinute(10)}})
			l := core.MustNewLimiter(s, *p, core.WithTimeout(5*time.Second))
			for range 2 { // the first round loads the scripts (NOSCRIPT, then EVAL)
				base := n.n.Load()
				verbRound(t, l)
				if n.n.Load()-base == 8 {
					return
				}
			}
			t.Fatal("more than one round trip per verb")
		})
	}
}

func verbRound(t *testing.T, l *core.Limiter) {
	ctx := context.Background()
	{
		{
			d, err := l.Charge(ctx, "u", 10)
			require.NoError(t, err)
			assert.False(t, d.Allowed)
			d, err = l.Peek(ctx, "u")
			require.NoError(t, err)
			assert.False(t, d.Allowed, "an exhausted key peeks denied")
			d2, err := l.Peek(ctx, "u")
			require.NoError(t, err)
			assert.InDelta(t, d.RetryAfter, d2.RetryAfter, float64(50*time.Millisecond), "a peek consumed nothing")
			require.NoError(t, l.Reset(ctx, "u"))
			d, err = l.PeekN(ctx, "u", 10)
			require.NoError(t, err)
			assert.True(t, d.Allowed, "a reset key has its full quota")
			d, err = l.Charge(ctx, "u", 12) // 2 past the limit
			require.NoError(t, err)
			assert.False(t, d.Allowed)
			assert.Greater(t, d.RetryAfter, 17*time.Second, "the 2 owed are repaid (6 s each) before one more")
			d, err = l.Refund(ctx, "u", 1<<40)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(10), d.Remaining, "never above a fresh quota")
			require.NoError(t, l.Reset(ctx, "u"))
		}
	}
}

func TestVerbScriptsBuilt(t *testing.T) {
	decide, persist, reply := tailParts()
	require.NotEmpty(t, decide)
	require.True(t, strings.HasPrefix(persist, "\nfor i = 1, nl do"))
	require.NotEmpty(t, reply)
	s, _, _ := nodeStore(t)
	p := mustPolicy(t, core.Policy{Name: "log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerSecond(3)}})
	_, err := s.Charge(context.Background(), "k", p, time.Now(), 1)
	require.ErrorIs(t, err, core.ErrUnsupported)
	require.NoError(t, s.Reset(context.Background(), "k", p))
}

// scriptCalls counts script calls (EVALSHA and EVAL; not connection set-up).
type scriptCalls struct{ counter }

func (c *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts nothing: go-redis sets connections up in a
// pipeline.
func (c *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestWaitSharesRedis: 10 stores (processes) with 2 waiters each share
// 20 per second through one Redis node: the rate holds, and each
// admission costs at most 1.5 script calls.
func TestWaitSharesRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 1.5 s of real time")
	}
	srv := redistest.StartNode(t)
	var calls scriptCalls
	p := core.Policy{Name: "w", Limits: []core.Limit{core.PerSecond(20)}}
	ctx := context.Background()
	var stop atomic.Bool
	var admitted atomicInt
	done := make(chan struct{})
	const procs, waiters = 10, 2
	var ls []*core.Limiter
	for range procs {
		c := srv.NewClient(t)
		c.AddHook(&calls)
		ls = append(ls, core.MustNewLimiter(newStore(t, c), p, core.WithTimeout(time.Second)))
	}
	require.NoError(t, ls[0].Wait(ctx, "warm-up")) // loads the script once
	calls.n.Store(0)
	start := time.Now()
	time.AfterFunc(1500*time.Millisecond, func() { stop.Store(true) })
	for _, l := range ls {
		for range waiters {
			go func() {
				defer func() { done <- struct{}{} }()
				for !stop.Load() {
					require.NoError(t, l.Wait(ctx, "api"))
					admitted.Add(1)
				}
			}()
		}
	}
	for range procs * waiters {
		<-done
	}
	elapsed := time.Since(start)
	n := admitted.Load()
	t.Logf("%d admitted in %v with %d calls (%.2f per admission)", n, elapsed, calls.n.Load(), float64(calls.n.Load())/float64(n))
	require.LessOrEqual(t, n, int64(20+20*elapsed.Seconds()+1), "the rate holds")
	require.GreaterOrEqual(t, n, int64(20+20*1.2), "waiters are admitted at the rate")
	require.LessOrEqual(t, float64(calls.n.Load()), 1.5*float64(n), "store calls per admission")
}

// TestVerbsConcurrentExactRedis mixes Take, Charge and Credit from 4
// store instances (each its own client) × 8 goroutines on a few keys at
// one instant, with a quota no cap binds, so every order leaves the same
// state: each key's final state must be the sequential model's.
func TestVerbsConcurrentExactRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Microsecond)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowCounter} {
		pol := core.Policy{Name: "x-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.Per(1_000_000, time.Hour), core.Per(2_000_000, 2*time.Hour)}}
		p := mustPolicy(t, pol)
		var stores []*Store
		for range 4 {
			stores = append(stores, newStore(t, srv.NewClient(t), WithClientTime()))
		}
		keys := []string{"a", "b", "c"}
		const G, N = 8, 40
		var wg sync.WaitGroup
		rounds := make([]atomic.Int64, len(keys))
		for si, s := range stores {
			for g := range G {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range N {
						k := (si + g + i) % len(keys)
						_, err1 := s.Take(ctx, keys[k], p, now, 1)
						_, err2 := s.Charge(ctx, keys[k], p, now, 3)
						_, err3 := s.Credit(ctx, keys[k], p, now, 2) // after this goroutine's own charge
						if err1 == nil && err2 == nil && err3 == nil {
							rounds[k].Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		for k, key := range keys {
			r := newRef(p)
			for range rounds[k].Load() {
				r.verb('A', key, now, 1)
				r.verb('C', key, now, 3)
				r.verb('R', key, now, 2)
			}
			want := r.verb('P', key, now, 1)
			got, err := stores[0].Peek(ctx, key, p, now, 1)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s key %s after %d rounds", alg, key, rounds[k].Load())
		}
	}
}
