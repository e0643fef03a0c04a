package redisstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/internal/redistest"
)

// verbRef applies a verb to the reference state with core's model.
func (r *ref) verb(v byte, key string, now time.Time, cost int64) core.Decision {
	st, ok := r.state[key]
	if !ok {
		st = make([]int64, r.c.StateWords())
		r.state[key] = st
	}
	return conformkit.ApplyVerb(r.c, st, v, max(now.UnixMicro(), 0), cost, verbMaxWait.Microseconds())
}

const verbMaxWait = 5 * time.Second

func storeVerb(ctx context.Context, s *redisStore, v byte, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
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

// verbPolicies are the decision differential's policies and, for the
// verbs' own paths: sliding logs whose rings exceed luaLogBody's 256
// slots (read by GETRANGE, written by SETRANGE), and elastic policies
// (the verbs decide against the nominal limits; the log's ring holds the
// ceiling).
func verbPolicies() []core.Policy {
	ps := diffPolicies()
	big := core.Policy{Name: "log/big", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(300, time.Second), core.Per(1100, 5*time.Second)}}
	big1 := core.Policy{Name: "log/big1", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(2500, 2*time.Second)}}
	ps = append(ps, big, big1)
	for _, a := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		p := core.Policy{Name: a.String() + "/elastic", Algorithm: a, Limits: []core.Limit{core.Per(6, time.Second), core.Per(20, 4*time.Second)},
			Elastic: &core.Elastic{CeilingPercent: 250, Signal: alwaysRoom()}}
		if a == core.SlidingWindowCounter {
			p.Buckets = 4
		}
		ps = append(ps, p)
	}
	return ps
}

// TestVerbsDifferential runs random sequences of every verb (and Take)
// through the Redis scripts and core's model, and requires identical
// decisions step by step, for every policy of verbPolicies (every
// algorithm, one limit and several, soft, shadow, counted denials,
// elastic, sliding logs read in slots), with huge costs (clock steps
// back: TestVerbsClockBack).
func TestVerbsDifferential(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for i, pol := range verbPolicies() {
		verbs := "AAPCRWX"
		if pol.Elastic != nil {
			verbs = "AAPCRX" // Reserve is Take for an elastic policy; WaitN does not reserve it
		}
		p := mustPolicy(t, pol)
		big := p.Limits[0].Requests > 100
		t.Run(p.Name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 24))
			r := newRef(p)
			w := p.Limits[len(p.Limits)-1].Window
			var offset time.Duration
			t0 := time.Now().Truncate(time.Second)
			keys := []string{"alice", "bob"}
			seen := map[byte]int{}
			for step := 0; step < 500; step++ {
				switch x := rng.IntN(10); {
				case x < 3:
				case x < 6:
					offset += time.Duration(rng.Int64N(int64(w / 5)))
				case x < 8:
					// whole tenths of the window: units leave it exactly
					// at a step's instant
					offset += time.Duration(rng.Int64N(4)) * (w / 10)
				default:
					offset += time.Duration(rng.Int64N(int64(2 * w)))
				}
				now := t0.Add(offset)
				cost := rng.Int64N(8)
				if big {
					cost = rng.Int64N(400)
				}
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
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
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

// TestVerbsLogWindowEdge: the sliding log's Charge and Refund at the
// window's edge, to the µs, as core's model (a unit stamped now − W has
// left; one stamped a µs later has not, and is what a refund returns).
func TestVerbsLogWindowEdge(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for _, lim := range []core.Limit{core.Per(3, time.Second), core.Per(400, time.Second)} {
		p := mustPolicy(t, core.Policy{Name: fmt.Sprint("edge-", lim.Requests), Algorithm: core.SlidingWindowLog, Limits: []core.Limit{lim}})
		r := newRef(p)
		t0 := time.Now().Truncate(time.Second)
		n := lim.Requests
		for i, st := range []struct {
			v    byte
			at   time.Duration
			cost int64
		}{
			{'C', 0, 1}, {'C', time.Microsecond, n - 1}, {'P', time.Second, 1},
			{'R', time.Second, n}, {'A', time.Second, n}, {'P', time.Second, 1},
			{'C', 2 * time.Second, 2 * n}, {'R', 3*time.Second - time.Microsecond, 1}, {'P', 3*time.Second - time.Microsecond, 1},
			{'R', 3 * time.Second, n}, {'A', 3 * time.Second, n + 1}, {'P', 3 * time.Second, n},
		} {
			now := t0.Add(st.at)
			want := r.verb(st.v, "k", now, st.cost)
			got, err := storeVerb(ctx, s, st.v, "k", p, now, st.cost)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s step %d %c", p.Name, i, st.v)
		}
	}
}

// TestVerbsServerTimeAndCluster: on a Cluster, with Redis's clock, each
// verb is one round trip: a peek writes nothing, a reset restores the
// full quota, a charge past the limit is repaid before anything more is
// admitted, a refund never exceeds a fresh quota.
func TestVerbsServerTimeAndCluster(t *testing.T) {
	t.Parallel()
	node := redistest.StartNode(t)
	cl := redistest.SharedCluster(t) // on keys of its own (KeyPrefix)
	for name, client := range map[string]redis.UniversalClient{"node": node.NewClient(t), "cluster": cl.NewClient(t)} {
		t.Run(name, func(t *testing.T) {
			var n counter
			client.AddHook(&n)
			s := newStore(t, client, WithPrefix(redistest.KeyPrefix(t)))
			p := mustPolicy(t, core.Policy{Name: "c", Limits: []core.Limit{core.PerMinute(10)}})
			l := core.MustNewLimiter(s, *p, core.WithTimeout(5*time.Second))
			require.NoError(t, s.Preload(context.Background())) // the verb scripts too: no NOSCRIPT, then EVAL
			for range 2 {
				base := n.n.Load()
				verbRound(t, l)
				require.Equal(t, int64(8), n.n.Load()-base, "one round trip per verb, the first time too")
			}
		})
	}
}

// TestVerbsPreloaded: after Preload (on a node, and on every master of a
// Cluster), the first call of every verb of every algorithm is one
// EVALSHA: no NOSCRIPT, no EVAL of the source.
func TestVerbsPreloaded(t *testing.T) {
	node := redistest.StartNode(t)
	cl := redistest.StartCluster(t)
	for name, client := range map[string]redis.UniversalClient{"node": node.NewClient(t), "cluster": cl.NewClient(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var ps []*core.Policy
			for _, pol := range verbPolicies() {
				ps = append(ps, mustPolicy(t, pol))
			}
			s := newStore(t, client)
			require.NoError(t, s.Preload(ctx, ps...))
			var n sentCommands
			client.AddHook(&n)
			for _, p := range ps {
				for _, v := range []byte("PCRWX") {
					if v == 'W' && p.Elastic != nil {
						continue
					}
					before := len(n.names())
					_, err := storeVerb(ctx, s, v, "k-"+p.Name, p, time.Now(), 1)
					require.NoError(t, err)
					sent := n.names()[before:]
					require.Equal(t, []string{"evalsha"}, sent, "%s %c: one EVALSHA", p.Name, v)
				}
			}
		})
	}
}

// sentCommands records the name of every command sent (a command go-redis
// sends again, as EVAL after NOSCRIPT, twice).
type sentCommands struct {
	counter
	mu   sync.Mutex
	sent []string
}

func (c *sentCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.sent = append(c.sent, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *sentCommands) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

func verbRound(t *testing.T, l *core.Limiter) {
	ctx := context.Background()
	{
		{
			d, err := l.Charge(ctx, "u", 10)
			require.NoError(t, err)
			assert.False(t, d.Allowed)
			d, err = l.PeekN(ctx, "u", 1)
			require.NoError(t, err)
			assert.False(t, d.Allowed, "an exhausted key peeks denied")
			d2, err := l.PeekN(ctx, "u", 1)
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
	head, lpersist := logParts()
	require.NotEmpty(t, head)
	require.True(t, strings.HasPrefix(lpersist, "\nfor i = 1, nl do\n  local s = L[i]\n  if s.dirty"))
	for a, v := range verbs {
		if core.Algorithm(a) != core.SlidingWindowLog { // peekLog
			require.NotNil(t, v.peek, "%s", core.Algorithm(a))
		}
		require.NotNil(t, v.charge, "%s", core.Algorithm(a))
		require.NotNil(t, v.refund, "%s", core.Algorithm(a))
	}
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

// TestWaitSharesRedis: 10 store instances (10 processes' worth, each its
// own client) with 2 waiters each share 20 per second through one Redis
// node at Redis's clock, each waiter admitted 3 times: the rate holds (the
// 60 admissions take at least the 40 beyond the burst's 2 s: the run's
// length only grows on a loaded machine) and each admission costs at most
// 1.5 script calls (counted: a reservation is one call whatever the
// machine's load).
func TestWaitSharesRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	var calls scriptCalls
	p := core.Policy{Name: "w", Limits: []core.Limit{core.PerSecond(20)}}
	ctx := context.Background()
	const procs, waiters, each = 10, 2, 3
	var ls []*core.Limiter
	for i := range procs {
		c := srv.NewClient(t)
		c.AddHook(&calls)
		s := newStore(t, c)
		if i == 0 {
			require.NoError(t, s.Preload(ctx)) // no NOSCRIPT, then EVAL, in the count
		}
		ls = append(ls, core.MustNewLimiter(s, p, core.WithTimeout(5*time.Second)))
	}
	calls.n.Store(0)
	errs := make(chan error, procs*waiters*each)
	var admitted atomicInt
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range ls {
		for range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if err := l.Wait(ctx, "api"); err != nil {
						errs <- err
						return
					}
					admitted.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n, c := admitted.Load(), calls.n.Load()
	require.Equal(t, int64(procs*waiters*each), n)
	t.Logf("%d admitted in %v with %d script calls (%.2f per admission)", n, elapsed, c, float64(c)/float64(n))
	require.GreaterOrEqual(t, elapsed, time.Duration(n-20-1)*time.Second/20, "the rate holds: 20 at once, then 20 a second")
	require.LessOrEqual(t, float64(c), 1.5*float64(n), "script calls per admission")
}

// TestVerbsConcurrentExactRedis mixes Take, Charge and Credit from 4
// store instances (each its own client) × 8 goroutines on a few keys at
// one instant, with a quota no cap binds, so every order leaves the same
// state: each key's final state must be the sequential model's.
func TestVerbsConcurrentExactRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Microsecond)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		pol := core.Policy{Name: "x-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.Per(1_000_000, time.Hour), core.Per(2_000_000, 2*time.Hour)}}
		if alg == core.SlidingWindowLog {
			// rings read and written in slots, which no cap binds
			pol.Limits = []core.Limit{core.Per(3000, time.Hour), core.Per(5000, 2*time.Hour)}
		}
		p := mustPolicy(t, pol)
		var stores []*redisStore
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
