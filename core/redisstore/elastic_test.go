package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
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

type roomSignal struct{ on atomic.Bool }

func (s *roomSignal) Acquire(context.Context, int64) (bool, error) { return s.on.Load(), nil }

func alwaysRoom() *roomSignal {
	s := &roomSignal{}
	s.on.Store(true)
	return s
}

// elasticDiffPolicies: every algorithm, one and two limits, bursts, a
// ceiling above 200% (GCRA's clock-step bound must use it).
func elasticDiffPolicies() []core.Policy {
	var ps []core.Policy
	for _, a := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		base := func(name string, ceil int, limits ...core.Limit) core.Policy {
			p := core.Policy{Name: "el/" + a.String() + "/" + name, Algorithm: a, Limits: limits,
				Elastic: &core.Elastic{CeilingPercent: ceil, Signal: alwaysRoom()}}
			if a == core.SlidingWindowCounter {
				p.Buckets = 4
			}
			return p
		}
		ps = append(ps,
			base("one", 200, core.Per(5, time.Second)),
			base("two", 150, core.Per(20, 15*time.Second), core.Per(6, time.Second)),
			base("x3", 300, core.Per(4, 2*time.Second)),
		)
		if a == core.GCRA || a == core.TokenBucket {
			ps = append(ps, base("burst", 250, core.Per(3, time.Second).WithBurst(9), core.Per(100, time.Minute).WithBurst(20)))
		}
	}
	return ps
}

// TestElasticDifferential: the Lua elastic path against core's math. On
// random traffic, every nominal Take equals core's Decide (ElasticRoom
// included) and every TakeElastic equals core's DecideElastic, on the same
// state, for every algorithm, one and two limits.
func TestElasticDifferential(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for i, pol := range elasticDiffPolicies() {
		p := mustPolicy(t, pol)
		t.Run(p.Name, func(t *testing.T) {
			c, err := p.Compile()
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(i), 43))
			state := map[string][]int64{}
			w := p.Limits[0].Window
			for _, l := range p.Limits {
				w = min(w, l.Window)
			}
			var offset time.Duration
			keys := []string{"alice", "bob"}
			var elastic, rooms, ceilingDenied, direct int
			for step := 0; step < 400; step++ {
				switch x := rng.IntN(10); {
				case x < 4:
				case x < 8:
					offset += time.Duration(rng.Int64N(int64(w / 5)))
				case x < 9:
					offset += time.Duration(rng.Int64N(int64(w)))
				default:
					offset += time.Duration(rng.Int64N(int64(3 * w)))
				}
				now := time.Now().Add(offset).Truncate(time.Microsecond)
				cost := int64(1)
				if x := rng.IntN(10); x < 2 {
					cost = rng.Int64N(8)
				}
				key := keys[rng.IntN(len(keys))]
				st, ok := state[key]
				if !ok {
					st = make([]int64, c.StateWords())
					state[key] = st
				}
				us := now.UnixMicro()
				if rng.IntN(8) == 0 {
					// an elastic take straight away, as after a race in
					// which the quota came back: within the limit it is
					// not Elastic
					want := decideElastic(c, st, us, cost)
					got, err := s.TakeElastic(ctx, key, p, now, cost)
					require.NoError(t, err)
					require.Equal(t, want, got, "step %d key %s now %d cost %d: direct elastic", step, key, us, cost)
					if got.Allowed && !got.Elastic {
						direct++
					}
					continue
				}
				want := c.Decide(st, us, cost)
				got, err := s.Take(ctx, key, p, now, cost)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d key %s now %d cost %d: nominal", step, key, us, cost)
				if got.Allowed {
					continue
				}
				if got.ElasticRoom {
					rooms++
				}
				// take elastically on most denials, also where the hint says
				// no room (the take must then deny exactly as core does)
				if rng.IntN(4) == 0 {
					continue
				}
				want = decideElastic(c, st, us, cost)
				got, err = s.TakeElastic(ctx, key, p, now, cost)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d key %s now %d cost %d: elastic", step, key, us, cost)
				if got.Elastic {
					elastic++
				} else if !got.Allowed {
					ceilingDenied++
				}
			}
			require.NotZero(t, elastic, "the sequence must admit elastically")
			require.NotZero(t, rooms)
			require.NotZero(t, ceilingDenied, "and reach the ceiling")
			require.NotZero(t, direct, "and admit within the limit by an elastic take")
		})
	}
}

// exactCeiling runs 1,000 goroutines, one request each, on one key with a
// limit of 100 and a ceiling of 250% through a Limiter on store: exactly
// 100 nominal and 150 elastic admissions.
func exactCeiling(t *testing.T, store core.Store, alg core.Algorithm) {
	p := core.Policy{Name: "el-exact-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.PerHour(100)},
		Elastic: &core.Elastic{CeilingPercent: 250, Signal: alwaysRoom()}}
	if alg == core.SlidingWindowCounter {
		p.Buckets = 60
	}
	l, err := core.NewLimiter(store, p, core.WithClock(core.NewManualClock(epoch.Truncate(time.Hour))), core.WithTimeout(time.Minute))
	require.NoError(t, err)
	var nominal, elastic, denied atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := l.Allow(context.Background(), "k")
			assert.NoError(t, err)
			switch {
			case d.Elastic:
				elastic.Add(1)
			case d.Allowed:
				nominal.Add(1)
			default:
				denied.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.Equal(t, int64(100), nominal.Load())
	assert.Equal(t, int64(150), elastic.Load())
	assert.Equal(t, int64(750), denied.Load())
}

// TestElasticCeilingExactUnderConcurrency: the ceiling holds exactly on a
// node for every algorithm, and on a Cluster.
func TestElasticCeilingExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	srv := redistest.StartNode(t)
	s := newStore(t, redisClient(t, srv, 50), WithClientTime())
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run("node/"+alg.String(), func(t *testing.T) { exactCeiling(t, s, alg) })
	}
	t.Run("cluster/fixed_window", func(t *testing.T) {
		cl := redistest.SharedCluster(t) // on keys of its own
		exactCeiling(t, newStore(t, cl.NewClient(t), WithClientTime(), WithPrefix(redistest.KeyPrefix(t))), core.FixedWindow)
	})
}

// redisClient is a client of srv with a pool of n connections.
func redisClient(t *testing.T, srv *redistest.Server, n int) *redis.Client {
	c := srv.NewClient(t)
	opt := c.Options()
	opt.PoolSize = n
	c2 := redis.NewClient(opt)
	t.Cleanup(func() { _ = c2.Close() })
	return c2
}

// TestElasticCapacityAcrossTwoStores: two Stores (two app servers, two
// clients) on one Redis share the fleet-wide capacity limit. Ten keys,
// limit 10 each, ceiling 1000% (never binding), capacity 60. First
// server 0 alone, 130 goroutines, 13 per key: exactly 100 nominal and 30
// elastic. Then server 1 alone, 500 goroutines: nothing nominal is left
// and exactly the 30 elastic server 0 left (60 if the capacity were not
// shared). Then 1,000 goroutines split over both servers: nothing.
func TestElasticCapacityAcrossTwoStores(t *testing.T) {
	srv := redistest.StartNode(t)
	clock := core.WithClock(core.NewManualClock(epoch.Truncate(time.Hour)))
	var servers [2]*core.Limiter
	for i := range servers {
		s := newStore(t, redisClient(t, srv, 30), WithClientTime())
		capL, err := core.NewLimiter(s, core.Policy{Name: "capacity", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(60)}}, clock, core.WithTimeout(time.Minute))
		require.NoError(t, err)
		sig, err := core.NewCapacityLimit(capL, "fleet")
		require.NoError(t, err)
		servers[i], err = core.NewLimiter(s, core.Policy{Name: "api", Algorithm: core.GCRA, Limits: []core.Limit{core.PerHour(10)},
			Elastic: &core.Elastic{CeilingPercent: 1000, Signal: sig}}, clock, core.WithTimeout(time.Minute))
		require.NoError(t, err)
	}
	// run makes n goroutines, the i-th on server on(i) and key i%10,
	// and returns what each server admitted nominally and elastically
	run := func(n int, on func(i int) int) (nominal, elastic [2]int64) {
		var nom, el [2]atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := on(i)
				d, err := servers[s].Allow(context.Background(), "user"+strconv.Itoa(i%10))
				assert.NoError(t, err)
				if d.Elastic {
					el[s].Add(1)
				} else if d.Allowed {
					nom[s].Add(1)
				}
			}()
		}
		wg.Wait()
		return [2]int64{nom[0].Load(), nom[1].Load()}, [2]int64{el[0].Load(), el[1].Load()}
	}
	nominal, elastic := run(130, func(int) int { return 0 })
	assert.Equal(t, [2]int64{100, 0}, nominal, "server 0 alone: nominal")
	assert.Equal(t, [2]int64{30, 0}, elastic, "server 0 alone: elastic")
	nominal, elastic = run(500, func(int) int { return 1 })
	assert.Equal(t, [2]int64{0, 0}, nominal, "server 1 alone: nominal")
	assert.Equal(t, [2]int64{0, 30}, elastic, "server 1 alone: elastic, what server 0 left of the shared capacity")
	nominal, elastic = run(1000, func(i int) int { return i % 2 })
	assert.Equal(t, [2]int64{0, 0}, nominal, "both: nominal")
	assert.Equal(t, [2]int64{0, 0}, elastic, "both: elastic")
}

// TestElasticKeys: an elastic policy's keys differ from the same policy's
// without Elastic in the parameter digest (the ceiling changes what the
// state means).
func TestElasticKeys(t *testing.T) {
	s := newStore(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}))
	hard := mustPolicy(t, core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10)}})
	el := *hard
	el.Elastic = &core.Elastic{CeilingPercent: 200, Signal: alwaysRoom()}
	kh, err := s.Keys(hard, "k")
	require.NoError(t, err)
	ke, err := s.Keys(&el, "k")
	require.NoError(t, err)
	require.NotEqual(t, kh, ke)
	require.Equal(t, kh[0][:len(kh[0])-4], ke[0][:len(ke[0])-4], "the same tag and limit; another digest")
}

// BenchmarkElasticTake: one decision within the limit, serial, for a hard
// policy (its own straight-line script) and the same policy with Elastic
// (the generic script with the elastic mode): the latency and the Redis
// CPU (redis-µs/call) an elastic policy pays within its limit.
func BenchmarkElasticTake(b *testing.B) {
	srv := redistest.StartNode(b)
	c := srv.NewClient(b)
	s := newStore(b, c)
	ctx := context.Background()
	if err := s.Preload(ctx); err != nil {
		b.Fatal(err)
	}
	keys := benchKeys(100_000)
	for _, alg := range []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowCounter} {
		for _, el := range []bool{false, true} {
			p := core.Policy{Name: "b-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.PerMinute(100)}}
			name := alg.String() + "/hard"
			if el {
				p.Name += "-el"
				p.Elastic = &core.Elastic{CeilingPercent: 200, Signal: alwaysRoom()}
				name = alg.String() + "/elastic"
			}
			if alg == core.SlidingWindowCounter {
				p.Buckets = 60
				p.Limits = []core.Limit{core.PerHour(1000)}
			}
			b.Run(name, func(b *testing.B) {
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				for i := 0; b.Loop(); i++ {
					if _, err := s.Take(ctx, keys[i%len(keys)], &p, time.Time{}, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportScriptStats(b, ctx, c)
			})
		}
	}
}

// TestElasticScriptChoice: a single-limit elastic GCRA or fixed window
// runs its own script (which Preload loads); every other elastic policy
// its algorithm's generic script.
func TestElasticScriptChoice(t *testing.T) {
	s := &redisStore{}
	assert.Contains(t, allScripts, gcra1E)
	assert.Contains(t, allScripts, fixedWindow1E)
	for a := core.GCRA; a <= core.SlidingWindowCounter; a++ {
		for _, limits := range [][]core.Limit{{core.PerMinute(10)}, {core.PerHour(100), core.PerMinute(10)}} {
			p := mustPolicy(t, core.Policy{Name: "p", Algorithm: a, Limits: limits, Elastic: &core.Elastic{CeilingPercent: 200, Signal: alwaysRoom()}})
			c, err := s.compile(p)
			require.NoError(t, err)
			want := generic[a]
			if a == core.GCRA && len(limits) == 1 {
				want = gcra1E
			}
			if a == core.FixedWindow && len(limits) == 1 {
				want = fixedWindow1E
			}
			assert.Same(t, want, c.script, "%s, %d limits", a, len(limits))
			assert.NotNil(t, c.etail)
		}
	}
}

// TestElasticClockBack: after the clock steps back by several windows,
// every elastic script decides as core does (the state written ahead is
// normalized alike, with the ceiling's bound), for one and two limits.
func TestElasticClockBack(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for _, a := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		for _, limits := range [][]core.Limit{{core.PerHour(4)}, {core.Per(40, 24*time.Hour), core.PerHour(4)}} {
			p := mustPolicy(t, core.Policy{Name: fmt.Sprintf("back-%s-%d", a, len(limits)), Algorithm: a, Limits: limits,
				Elastic: &core.Elastic{CeilingPercent: 300, Signal: alwaysRoom()}})
			c, err := p.Compile()
			require.NoError(t, err)
			st := make([]int64, c.StateWords())
			t0 := time.Now().Add(72 * time.Hour).Truncate(time.Microsecond)
			type step struct {
				at      time.Duration
				elastic bool
			}
			var steps []step
			for i := 0; i < 14; i++ { // 4 nominal, 8 elastic, then denials at the ceiling
				steps = append(steps, step{0, i >= 4})
			}
			steps = append(steps,
				// the clock steps back: denied requests leave the state
				// normalized into now's window (no write needed to decide)
				step{-5 * time.Hour, false}, step{-5 * time.Hour, true},
				step{-5*time.Hour + time.Minute, false}, step{-5*time.Hour + time.Minute, true},
				// and forward again, into the window first written
				step{time.Minute, false}, step{time.Minute, true},
				step{-30 * time.Hour, false}, step{-30 * time.Hour, true},
			)
			for i, step := range steps {
				now := t0.Add(step.at)
				var want, got core.Decision
				if step.elastic {
					want = decideElastic(c, st, now.UnixMicro(), 1)
					got, err = s.TakeElastic(ctx, "k", p, now, 1)
				} else {
					want = c.Decide(st, now.UnixMicro(), 1)
					got, err = s.Take(ctx, "k", p, now, 1)
				}
				require.NoError(t, err)
				require.Equal(t, want, got, "%s step %d", p.Name, i)
			}
		}
	}
}

// TestElasticDrain (issue 22): on Redis, two app servers sharing one
// capacity limit: one key's burst of 200 concurrent requests keeps only
// the capacity of its elastic admissions (the losers' is refunded by
// Refund); 20 other clients get the rest.
func TestElasticDrain(t *testing.T) {
	srv := redistest.StartNode(t)
	n := 0
	storetest.ElasticDrain(t, func(t *testing.T) []core.Store {
		n++
		pre := WithPrefix("drain" + strconv.Itoa(n) + ":")
		return []core.Store{newStore(t, redisClient(t, srv, 64), WithClientTime(), pre), newStore(t, redisClient(t, srv, 64), WithClientTime(), pre)}
	}, core.WithClock(core.NewManualClock(epoch.Truncate(time.Hour))), core.WithTimeout(time.Minute))
}

// TestRefund: Refund moves each GCRA tat back by cost × its interval,
// never below now, and refuses what it cannot refund.
func TestRefund(t *testing.T) {
	srv := redistest.StartNode(t)
	s := newStore(t, srv.NewClient(t), WithClientTime())
	ctx := context.Background()
	// take 10, refund 3, take 3 more: each limit got the 3 back
	fill := func(p *core.Policy, at time.Time) {
		t.Helper()
		for i := 0; i < 13; i++ {
			if i == 10 {
				d, err := s.Take(ctx, "k", p, at, 1)
				require.NoError(t, err)
				require.False(t, d.Allowed, "%s: full", p.Name)
				require.NoError(t, s.Refund(ctx, "k", p, at, 3))
			}
			d, err := s.Take(ctx, "k", p, at, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed, "%s: unit %d", p.Name, i)
		}
		d, _ := s.Take(ctx, "k", p, at, 1)
		require.False(t, d.Allowed, "%s: full again", p.Name)
	}
	p := core.Policy{Name: "r", Limits: []core.Limit{core.PerMinute(10), core.PerHour(20)}}
	fill(&p, epoch)
	require.NoError(t, s.Refund(ctx, "k", &p, epoch, 1000))
	ks, _ := s.Keys(&p, "k")
	n, err := srv.NewClient(t).Exists(ctx, ks...).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a refund to a full bucket deletes the keys")
	require.NoError(t, s.Refund(ctx, "absent", &p, epoch, 1))
	log := core.Policy{Name: "log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerMinute(10)}}
	assert.ErrorContains(t, s.Refund(ctx, "k", &log, epoch, 1), "cannot be refunded")

	// fixed window: the count in force goes down, not below 0
	at := epoch.Truncate(time.Hour)
	fw := core.Policy{Name: "fw", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10), core.PerHour(20)}}
	fill(&fw, at)
	d, _ := s.Take(ctx, "k", &fw, at.Add(time.Minute), 1)
	require.True(t, d.Allowed, "the next minute")
	require.Equal(t, int64(9), d.Remaining, "min(10 - 1, 20 - 11)")
	require.NoError(t, s.Refund(ctx, "k", &fw, at.Add(time.Minute), 100))
	d, _ = s.Take(ctx, "k", &fw, at.Add(time.Minute), 0)
	require.Equal(t, int64(10), d.Remaining, "both counts back to 0")
}

// decideElastic is core's model of an elastic take: DecideElasticTo
// returning the decision.
func decideElastic(c *core.Compiled, st []int64, now, cost int64) (d core.Decision) {
	c.DecideElasticTo(&d, st, now, cost)
	return d
}
