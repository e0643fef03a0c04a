// Package storetest is the conformance suite for core.Store
// implementations: the scenarios every limitkit store passes (the
// embedded store, the Redis store on a node and a Cluster, the fleet
// tier), public so that a store written outside this module can be held
// to the same contract. A store author calls [Run] from a test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) core.Store {
//			s := mystore.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		}, storetest.Options{})
//	}
//
// Run checks that decisions equal core's model step by step (the
// differential, over one policy per algorithm and switch), that a hot key is exact under concurrency (no lost
// update, no over-admission), that a multi-limit decision is
// all-or-nothing, keys are isolated, hostile keys (huge, binary) are
// harmless, a cost above capacity is never admitted, and time jumps and
// skewed clocks stay within bounds, and calendar limits (core.PerCalendar)
// decide as core does across daylight-saving changes, leap days and year
// ends, exactly under concurrency. A store that keeps a policy registry
// also runs [RunRegistry]; an elastic store [ElasticDrain]; a
// storekit.VerbStore [RunVerbs] (the verbs' contract) and, when it does any of
// the arithmetic itself, [RunVerbsDifferential] (every verb compared
// with core's model).
//
// Stores under test must honour the now argument of Take (the Redis store
// with its client-time option). The suite uses testify's require and
// assert; failures name the policy, the step and the time.
// testdata/extstore and testdata/ownmath are stores written as modules of
// their own that run the suites (ownmath with its own arithmetic, so with
// the differential, the verbs and the registry); TestExternalStore builds
// them.
package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
)

// Factory returns a fresh, empty store for one subtest; the suite does not
// close it (register cleanup with t.Cleanup).
type Factory func(t *testing.T) core.Store

// Options tunes the suite for slower stores.
type Options struct {
	// Goroutines and Calls size the exactness test (default 1000 × 10).
	Goroutines, Calls int
	// Steps is the length of each random differential sequence (default 300).
	Steps int
	// Stores is how many store instances share the exactness test's key
	// (default 1); each comes from the Factory, which must then return
	// stores that share state (e.g. clients of one Redis).
	Stores int
	// CoreDecides marks a store whose Take is core's own Decide on the
	// state it keeps (the embedded store): the suite then leaves out
	// Differential, which compares a store's decisions with core's Decide
	// and would compare core with itself. (Not a skip: the subtest is not
	// registered, so it is not counted.)
	CoreDecides bool
}

// Run runs the whole suite.
func Run(t *testing.T, f Factory, o Options) {
	if o.Goroutines == 0 {
		o.Goroutines, o.Calls = 1000, 10
	}
	if o.Steps == 0 {
		o.Steps = 300
	}
	if o.Stores == 0 {
		o.Stores = 1
	}
	if !o.CoreDecides {
		t.Run("Differential", func(t *testing.T) { testDifferential(t, f, o) })
	}
	t.Run("ExactUnderConcurrency", func(t *testing.T) { testExact(t, f, o) })
	t.Run("MultiLimitAllOrNothing", func(t *testing.T) { testMultiLimit(t, f) })
	t.Run("KeysAreIsolated", func(t *testing.T) { testIsolation(t, f) })
	t.Run("HostileKeys", func(t *testing.T) { testHostileKeys(t, f) })
	t.Run("CostAboveCapacityIsNever", func(t *testing.T) { testNever(t, f) })
	t.Run("TimeJumps", func(t *testing.T) { testTimeJumps(t, f) })
	t.Run("HugeCosts", func(t *testing.T) { testHugeCosts(t, f) })
	t.Run("ClockBackNoLockout", func(t *testing.T) { testClockBackNoLockout(t, f) })
	t.Run("SkewedServers", func(t *testing.T) { testSkewedServers(t, f) })
	t.Run("Calendar", func(t *testing.T) { testCalendar(t, f, o) })
}

// testDifferential drives random (time, cost) sequences through the store
// and through core's math on a local state; every decision must match.
func testDifferential(t *testing.T, f Factory, o Options) {
	for _, p := range conformkit.Policies() {
		t.Run(p.Name, func(t *testing.T) {
			s := f(t)
			c, err := p.Compile()
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(len(p.Name)), 7))
			state := make([]int64, c.StateWords())
			now := conformkit.Epoch
			ctx := context.Background()
			for i := 0; i < o.Steps; i++ {
				now = now.Add(randStep(rng))
				cost := int64(rng.IntN(4))
				if rng.IntN(10) == 0 {
					cost = 0
				}
				want := c.Decide(state, now.UnixMicro(), cost)
				got, err := s.Take(ctx, "k", &p, now, cost)
				require.NoError(t, err)
				got.Cached = false // where a store tier's denial came from, not what it is
				require.Equal(t, want, got, "step %d at +%v cost %d", i, now.Sub(conformkit.Epoch), cost)
			}
		})
	}
}

// randStep is a time step from a mix of scales: same instant, microseconds,
// milliseconds, around a window, and a rare long pause.
func randStep(rng *rand.Rand) time.Duration {
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return time.Duration(rng.IntN(1000)) * time.Microsecond
	case 2, 3:
		return time.Duration(rng.IntN(400)) * time.Millisecond
	case 4:
		return time.Duration(rng.IntN(2000)) * time.Millisecond
	}
	return time.Duration(rng.IntN(20)) * time.Second
}

// testExact hammers one key with Goroutines × Calls under a frozen clock and
// a limit of half that: exactly the limit is admitted, for every algorithm.
func testExact(t *testing.T, f Factory, o Options) {
	limit := int64(o.Goroutines * o.Calls / 2)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			p := core.Policy{Name: "exact-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.Per(limit, time.Hour)}}
			stores := make([]core.Store, o.Stores)
			for i := range stores {
				stores[i] = f(t)
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 1)
			for g := 0; g < o.Goroutines; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					s := stores[g%len(stores)]
					for i := 0; i < o.Calls; i++ {
						d, err := s.Take(context.Background(), "hot", &p, conformkit.Epoch, 1)
						if err != nil {
							select {
							case errs <- err:
							default:
							}
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}(g)
			}
			wg.Wait()
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			assert.Equal(t, limit, admitted.Load())
		})
	}
}

// testMultiLimit: a two-limit policy is all-or-nothing. Key "u" is denied
// 5 times by the per-minute limit after 20 admissions; key "ctl" gets the
// same 20 admissions and no denial. If the denials consumed nothing in the
// 15-minute limit, the two keys are in the same state, so every later
// decision on them is identical (Allowed, Remaining, RetryAfter, ResetAfter)
// and exactly 70 more fit in the 15-minute window (the window algorithms;
// the rate algorithms refill on top of the 70, identically for both keys).
// (The limits are the design notes' 900 per 15 minutes and 200 per minute
// scaled down tenfold: the same windows and ratios at a tenth of the round
// trips on a networked store.)
// It goes through the policy under test only, so it runs, exactly, on every
// store (a store may refuse a policy name reused with other limits).
func testMultiLimit(t *testing.T, f Factory) {
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			s := f(t)
			p := core.Policy{Name: "multi-" + alg.String(), Algorithm: alg,
				Limits: []core.Limit{core.Per(90, 15*time.Minute), core.Per(20, time.Minute)}}
			ctx := context.Background()
			now := conformkit.Epoch.Truncate(time.Hour)
			for _, key := range []string{"u", "ctl"} {
				for i := 0; i < 20; i++ {
					d, err := s.Take(ctx, key, &p, now, 1)
					require.NoError(t, err)
					require.True(t, d.Allowed, "%s: request %d", key, i)
				}
			}
			for i := 0; i < 5; i++ {
				d, err := s.Take(ctx, "u", &p, now, 1)
				require.NoError(t, err)
				require.False(t, d.Allowed)
				assert.Equal(t, core.Per(20, time.Minute), d.Limit, "the per-minute limit binds")
				assert.Positive(t, d.RetryAfter)
			}
			// Spend the rest of the 15-minute quota minute by minute on both keys.
			admitted, ctlAdmitted := 0, 0
			for m := 1; m <= 14; m++ {
				at := now.Add(time.Duration(m)*time.Minute + time.Second)
				for i := 0; i < 20; i++ {
					du, err := s.Take(ctx, "u", &p, at, 1)
					require.NoError(t, err)
					dc, err := s.Take(ctx, "ctl", &p, at, 1)
					require.NoError(t, err)
					require.Equal(t, dc, du, "minute %d request %d: the denied key must be decided exactly like the control key", m, i)
					if du.Allowed {
						admitted++
					}
					if dc.Allowed {
						ctlAdmitted++
					}
				}
			}
			require.Equal(t, ctlAdmitted, admitted)
			if alg == core.FixedWindow || alg == core.SlidingWindowLog {
				assert.Equal(t, 70, admitted, "exactly 70 left in the 15-minute window")
			} else {
				assert.GreaterOrEqual(t, admitted, 70, "rate algorithms refill within 15 minutes")
			}
		})
	}
}

func testIsolation(t *testing.T, f Factory) {
	s := f(t)
	p := core.Policy{Name: "iso", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(2, time.Minute)}}
	q := core.Policy{Name: "iso-other", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(2, time.Minute)}}
	for i := 0; i < 2; i++ {
		require.True(t, take(t, s, "a", &p).Allowed)
	}
	assert.False(t, take(t, s, "a", &p).Allowed)
	assert.True(t, take(t, s, "b", &p).Allowed, "another key has its own quota")
	assert.True(t, take(t, s, "a", &q).Allowed, "another policy has its own quota")
	// Policies with the same name share state (a fleet shares quota by name).
	same := p
	assert.False(t, take(t, s, "a", &same).Allowed, "a policy copy with the same name shares the key's state")
}

// take is one request of cost 1 at conformkit.Epoch that fails the test on a store
// error: a failing store returns a zero Decision, which must never pass
// for a denial.
func take(t *testing.T, s core.Store, key string, p *core.Policy) core.Decision {
	t.Helper()
	d, err := s.Take(context.Background(), key, p, conformkit.Epoch, 1)
	require.NoError(t, err, "key %q", key)
	return d
}

func testHostileKeys(t *testing.T, f Factory) {
	s := f(t)
	p := core.Policy{Name: "hostile", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(1, time.Minute)}}
	keys := []string{"", "{", "}", "{a}", "a:b", "a\nb", "a\x00b", "\xff\xfe", strings.Repeat("x", 64<<10), "*", "?", "user:{victim}"}
	ctx := context.Background()
	for _, k := range keys {
		d, err := s.Take(ctx, k, &p, conformkit.Epoch, 1)
		require.NoError(t, err, "key %q", k[:min(len(k), 16)])
		assert.True(t, d.Allowed, "key %q starts fresh", k[:min(len(k), 16)])
	}
	for _, k := range keys {
		d, err := s.Take(ctx, k, &p, conformkit.Epoch, 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "key %q keeps its own state", k[:min(len(k), 16)])
	}
}

func testNever(t *testing.T, f Factory) {
	s := f(t)
	for _, p := range conformkit.Policies() {
		d, err := s.Take(context.Background(), "n", &p, conformkit.Epoch, 1000)
		require.NoError(t, err)
		if p.Shadow {
			assert.True(t, d.Shadowed, p.Name)
			assert.True(t, d.Allowed, p.Name)
		} else {
			assert.False(t, d.Allowed, p.Name)
		}
		assert.Equal(t, core.Never, d.RetryAfter, p.Name)
	}
}

// testTimeJumps: the clock going back an hour or forward 30 days never
// mints quota beyond what the limit allows over the elapsed time (as the
// clock tells it).
func testTimeJumps(t *testing.T, f Factory) {
	for _, p := range conformkit.Policies() {
		if len(p.Limits) > 1 || p.Shadow || p.SoftPercent > 0 {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			s := f(t)
			ctx := context.Background()
			now := conformkit.Epoch
			admit := func(at time.Time, n int) int {
				k := 0
				for i := 0; i < n; i++ {
					d, err := s.Take(ctx, "j", &p, at, 1)
					require.NoError(t, err)
					if d.Allowed {
						k++
					}
				}
				return k
			}
			capa := int(max(p.Limits[0].Requests, p.Limits[0].Burst))
			require.Equal(t, capa, admit(now, capa+5), "a fresh key admits its capacity")
			assert.Zero(t, admit(now.Add(-time.Hour), 20), "a clock an hour back admits nothing more")
			assert.Zero(t, admit(now.Add(-time.Hour+30*time.Millisecond), 20))
			fwd := now.Add(30 * 24 * time.Hour)
			assert.Equal(t, capa, admit(fwd, capa+5), "30 days later the key is full again, and no more")
			assert.Zero(t, admit(fwd.Add(-time.Hour), 5), "and back again mints nothing")
		})
	}
}

// maxWait is the longest RetryAfter p may ever answer for a cost within
// its capacity, from any state (single-limit policies): two full refills
// for GCRA and the token bucket, two windows for the fixed window and the
// log, two windows and a bucket for the sliding counter
// (the second refill or window is the margin within which a state ahead
// of now stays in force: concurrent callers reach state in another order
// than they read the clock).
func maxWait(p *core.Policy) time.Duration {
	l := p.Limits[0]
	switch p.Algorithm {
	case core.GCRA, core.TokenBucket:
		capa := max(l.Requests, l.Burst)
		capa += capa * int64(p.SoftPercent) / 100
		return 2 * time.Duration(capa*core.EmissionInterval(l)) * time.Microsecond
	case core.SlidingWindowCounter:
		return 2*l.Window + l.Window/time.Duration(max(p.Buckets, 1))
	}
	return 2 * l.Window
}

// testHugeCosts: a cost above the capacity, however large, is denied with
// RetryAfter Never, consumes nothing (or, under CountDenied, no more than a
// full bucket or window), and hands no quota back, on a fresh key, a
// half-used one and one that has used its quota.
func testHugeCosts(t *testing.T, f Factory) {
	costs := []int64{1 << 31, 1<<31 - 1, 1 << 40, 1 << 53, 1<<53 + 1, 1 << 58, 1 << 62, math.MaxInt64 - 1, math.MaxInt64}
	for _, p := range conformkit.Policies() {
		t.Run(p.Name, func(t *testing.T) {
			s := f(t)
			ctx := context.Background()
			capa := int64(0)
			for _, l := range p.Limits {
				capa = max(capa, max(l.Requests, l.Burst))
			}
			capa += capa * int64(p.SoftPercent) / 100
			for _, used := range []int64{0, 1, capa} {
				key := fmt.Sprintf("huge-%d", used)
				now := conformkit.Epoch.Add(time.Duration(used) * time.Millisecond)
				for i := int64(0); i < used; i++ {
					_, err := s.Take(ctx, key, &p, now, 1)
					require.NoError(t, err)
				}
				for _, cost := range append(costs, capa+1) {
					before, err := s.Take(ctx, key, &p, now, 0)
					require.NoError(t, err)
					d, err := s.Take(ctx, key, &p, now, cost)
					require.NoError(t, err)
					assert.Equal(t, p.Shadow, d.Allowed, "used %d cost %d", used, cost)
					assert.Equal(t, core.Never, d.RetryAfter, "used %d cost %d", used, cost)
					after, err := s.Take(ctx, key, &p, now, 0)
					require.NoError(t, err)
					assert.LessOrEqual(t, after.Remaining, before.Remaining, "used %d cost %d: no quota handed back", used, cost)
					if !p.CountDenied {
						assert.Equal(t, before.Remaining, after.Remaining, "used %d cost %d: a denied cost consumes nothing", used, cost)
					}
				}
				// the same request at capacity is still judged normally
				d, err := s.Take(ctx, key, &p, now, 1)
				require.NoError(t, err)
				if used == 0 && !p.CountDenied {
					assert.True(t, d.Allowed, "a fresh key still admits after huge costs")
				}
				if used == capa && !p.Shadow {
					assert.False(t, d.Allowed, "a key that used its quota stays denied")
				}
			}
		})
	}
}

// testClockBackNoLockout: 100 per minute, one request, then the clock
// steps back 2 minutes or an hour (or was an hour fast and is corrected):
// no answer asks for a wait longer than the policy allows, and within one
// window of the step the key admits its quota, as with a steady clock.
func testClockBackNoLockout(t *testing.T, f Factory) {
	l := core.PerMinute(100)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		for _, back := range []time.Duration{2 * time.Minute, time.Hour} {
			for _, used := range []int{1, 100} {
				p := core.Policy{Name: "back-" + alg.String(), Algorithm: alg, Limits: []core.Limit{l}}
				if alg == core.SlidingWindowCounter {
					p.Buckets = 6
				}
				t.Run(fmt.Sprintf("%s/%v/used%d", alg, back, used), func(t *testing.T) {
					s := f(t)
					ctx := context.Background()
					now := conformkit.Epoch.Truncate(time.Hour).Add(30 * time.Second)
					for i := 0; i < used; i++ {
						d, err := s.Take(ctx, "u", &p, now, 1)
						require.NoError(t, err)
						require.True(t, d.Allowed)
					}
					start := now.Add(-back)
					admitted := 0
					// every 300 ms for a window, a burst of attempts
					for at := start; at.Before(start.Add(l.Window)); at = at.Add(300 * time.Millisecond) {
						for i := 0; i < 3; i++ {
							d, err := s.Take(ctx, "u", &p, at, 1)
							require.NoError(t, err)
							if d.Allowed {
								admitted++
								continue
							}
							require.NotEqual(t, core.Never, d.RetryAfter)
							require.LessOrEqual(t, d.RetryAfter, maxWait(&p), "at +%v: a wait beyond the policy's", at.Sub(start))
						}
					}
					assert.GreaterOrEqual(t, admitted, 100-used, "no lockout after the clock stepped back %v", back)
				})
			}
		}
	}
}

// testSkewedServers: two servers share a key under client time, one 2
// minutes fast, and a client alternates between them. The slow server
// never asks for a wait longer than the policy allows. (What each side
// admits is not asserted: a store that honours both clocks can let up to
// the skew's worth of refill through at each switch, see core.Decide.)
func testSkewedServers(t *testing.T, f Factory) {
	l := core.PerMinute(100)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		p := core.Policy{Name: "skew-" + alg.String(), Algorithm: alg, Limits: []core.Limit{l}}
		t.Run(alg.String(), func(t *testing.T) {
			s := f(t)
			ctx := context.Background()
			real := conformkit.Epoch.Truncate(time.Hour)
			slow, fast := 0, 0
			for i := 0; i < 2000; i++ {
				real = real.Add(150 * time.Millisecond)
				at := real
				if i%2 == 0 {
					at = real.Add(2 * time.Minute) // the fast server
				}
				d, err := s.Take(ctx, "u", &p, at, 1)
				require.NoError(t, err)
				if at.Equal(real) {
					if d.Allowed {
						slow++
					} else {
						require.LessOrEqual(t, d.RetryAfter, maxWait(&p), "request %d on the slow server", i)
					}
				} else if d.Allowed {
					fast++
				}
			}
			t.Logf("admitted: slow server %d, fast server %d", slow, fast)
		})
	}
}
