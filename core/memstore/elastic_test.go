package memstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"
)

// switchSignal is a controlled capacity signal: room while on; it counts
// what it handed out and what came back.
type switchSignal struct {
	on                 atomic.Bool
	acquired, released atomic.Int64
}

func (s *switchSignal) Acquire(_ context.Context, cost int64) (bool, error) {
	if !s.on.Load() {
		return false, nil
	}
	s.acquired.Add(cost)
	return true, nil
}

func (s *switchSignal) Release(_ context.Context, cost int64) { s.released.Add(cost) }

func onSignal() *switchSignal {
	s := &switchSignal{}
	s.on.Store(true)
	return s
}

// elasticPolicy is one limit of 100 per hour with a 250% ceiling.
func elasticPolicy(alg core.Algorithm, sig core.CapacitySignal) core.Policy {
	p := core.Policy{Name: "el-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.PerHour(100)},
		Elastic: &core.Elastic{CeilingPercent: 250, Signal: sig}}
	if alg == core.SlidingWindowCounter {
		p.Buckets = 60
	}
	return p
}

var allAlgorithms = []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}

// hourStart is an instant at the start of an hour, so fixed windows do
// not roll over during a test.
var hourStart = time.Unix(1_767_000_000-1_767_000_000%3600, 0)

// TestElasticCeilingExactUnderConcurrency: 1,000 goroutines, one request
// each, on one key with a limit of 100 and a ceiling of 250%: exactly 100
// nominal and 150 elastic admissions, whatever the interleaving; the
// signal's capacity handed out minus what came back is exactly the
// elastic admissions.
func TestElasticCeilingExactUnderConcurrency(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s := mustNew()
			defer s.Close()
			sig := onSignal()
			l, err := core.NewLimiter(s, elasticPolicy(alg, sig), core.WithClock(core.NewManualClock(hourStart)))
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
					assert.False(t, d.ElasticRoom, "the Limiter clears the hint")
					switch {
					case d.Elastic:
						assert.True(t, d.Allowed)
						assert.Zero(t, d.Remaining)
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
			assert.Equal(t, elastic.Load(), sig.acquired.Load()-sig.released.Load(), "capacity kept = elastic admissions")
		})
	}
}

// TestElasticCapacityLimitExact: ten keys share a capacity limit of 60 on
// the same store; each key's ceiling (1000%) never binds. 1,000
// goroutines over the ten keys: exactly 10 × 10 nominal admissions and 60
// elastic ones, the capacity limit's quota.
func TestElasticCapacityLimitExact(t *testing.T) {
	s := mustNew()
	defer s.Close()
	clock := core.WithClock(core.NewManualClock(hourStart))
	capL, err := core.NewLimiter(s, core.Policy{Name: "capacity", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(60)}}, clock)
	require.NoError(t, err)
	sig, err := core.NewCapacityLimit(capL, "fleet")
	require.NoError(t, err)
	l, err := core.NewLimiter(s, core.Policy{Name: "api", Algorithm: core.GCRA, Limits: []core.Limit{core.PerHour(10)},
		Elastic: &core.Elastic{CeilingPercent: 1000, Signal: sig}}, clock)
	require.NoError(t, err)
	var nominal, elastic atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.Allow(context.Background(), "user"+strconv.Itoa(i%10))
			if !assert.NoError(t, err) {
				return
			}
			if d.Elastic {
				elastic.Add(1)
			} else if d.Allowed {
				nominal.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(100), nominal.Load())
	assert.Equal(t, int64(60), elastic.Load())
}

// TestElasticSignalFlipsMidBurst drives one key on a manual clock: the
// limit, then elastic admissions while the signal has room, then hard
// denials the moment it has none (with the nominal limit's RetryAfter and
// headers), then elastic again when room returns, up to the ceiling.
func TestElasticSignalFlipsMidBurst(t *testing.T) {
	for _, alg := range []core.Algorithm{core.FixedWindow, core.SlidingWindowLog} {
		t.Run(alg.String(), func(t *testing.T) {
			s := mustNew()
			defer s.Close()
			clock := core.NewManualClock(hourStart)
			sig := &switchSignal{}
			p := elasticPolicy(alg, sig)
			p.Limits = []core.Limit{core.PerMinute(10)}
			l, err := core.NewLimiter(s, p, core.WithClock(clock))
			require.NoError(t, err)
			ctx := context.Background()
			allow := func() core.Decision {
				d, err := l.Allow(ctx, "k")
				require.NoError(t, err)
				return d
			}
			for i := 0; i < 10; i++ {
				require.True(t, allow().Allowed)
			}
			// no room: the hard limit
			d := allow()
			require.False(t, d.Allowed)
			require.Equal(t, core.Decision{Limit: core.PerMinute(10), ResetAfter: time.Minute, RetryAfter: time.Minute, Policy: p.Name}, d)
			sig.on.Store(true)
			for i := 0; i < 5; i++ {
				clock.Advance(time.Second)
				d := allow()
				require.True(t, d.Allowed && d.Elastic, "elastic %d", i)
				require.Zero(t, d.Remaining)
				require.Equal(t, core.PerMinute(10), d.Limit)
			}
			sig.on.Store(false)
			clock.Advance(time.Second)
			d = allow()
			require.False(t, d.Allowed)
			require.False(t, d.Elastic)
			// 54 s either way: the fixed window's end, or when the
			// sliding log's oldest unit leaves the minute
			require.Equal(t, 54*time.Second, d.RetryAfter)
			sig.on.Store(true)
			got := 0
			for i := 0; i < 20; i++ {
				if d := allow(); d.Allowed {
					require.True(t, d.Elastic)
					got++
				}
			}
			require.Equal(t, 10, got, "25 in the minute: the ceiling")
		})
	}
}

// TestElasticNoRoomIsHardLimiter: through Limiters on the embedded store,
// an elastic policy whose signal never has room returns exactly the
// decisions of the same policy without Elastic, on random traffic.
func TestElasticNoRoomIsHardLimiter(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s := mustNew()
			defer s.Close()
			clock := core.NewManualClock(hourStart)
			p := elasticPolicy(alg, &switchSignal{})
			p.Limits = []core.Limit{core.PerMinute(7)}
			hard := p
			hard.Name, hard.Elastic = "hard", nil
			le, err := core.NewLimiter(s, p, core.WithClock(clock))
			require.NoError(t, err)
			lh, err := core.NewLimiter(s, hard, core.WithClock(clock))
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 2000; i++ {
				clock.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
				cost := rng.Int64N(4)
				de, err1 := le.AllowN(context.Background(), "k", cost)
				dh, err2 := lh.AllowN(context.Background(), "k", cost)
				require.NoError(t, err1)
				require.NoError(t, err2)
				dh.Policy = p.Name
				require.Equal(t, dh, de, "step %d", i)
			}
		})
	}
}

func TestElasticSignals(t *testing.T) {
	s := mustNew()
	defer s.Close()
	clock := core.WithClock(core.NewManualClock(hourStart))
	var inflight core.InFlight
	capL, err := core.NewLimiter(s, core.Policy{Name: "cap", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(3)}}, clock)
	require.NoError(t, err)
	capSig, err := core.NewCapacityLimit(capL, "c")
	require.NoError(t, err)
	rel := onSignal()
	sig := core.AllSignals(core.LoadBelow{InFlight: &inflight, Max: 2}, rel, capSig)
	l, err := core.NewLimiter(s, core.Policy{Name: "api", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(1)},
		Elastic: &core.Elastic{CeilingPercent: 1000, Signal: sig}}, clock)
	require.NoError(t, err)
	ctx := context.Background()
	allow := func() core.Decision {
		d, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		return d
	}
	require.True(t, allow().Allowed)
	inflight.Enter()
	inflight.Enter()
	inflight.Enter()
	require.Equal(t, int64(3), inflight.Load())
	require.False(t, allow().Allowed, "3 in flight > 2: no room")
	require.Zero(t, rel.acquired.Load(), "later signals are not asked")
	inflight.Exit()
	for i := 0; i < 3; i++ {
		d := allow()
		require.True(t, d.Allowed && d.Elastic, "capacity %d", i)
	}
	require.False(t, allow().Allowed, "the capacity limit (3) is spent")
	require.Equal(t, int64(4), rel.acquired.Load())
	require.Equal(t, int64(1), rel.released.Load(), "the capacity limit's no released the signal before it")

	_, err = core.NewCapacityLimit(nil, "k")
	require.ErrorContains(t, err, "nil Limiter")
	_, err = core.NewCapacityLimit(capL, "")
	require.ErrorContains(t, err, "empty key")
	_, err = core.NewCapacityLimit(l, "k")
	require.ErrorContains(t, err, "is elastic")
	ok, _ := core.LoadBelow{}.Acquire(ctx, 1)
	require.False(t, ok, "the zero LoadBelow has no room")
}

// TestElasticPolicyConflict: two policies that differ only in their
// ceiling cannot share a name (their states mean different things).
func TestElasticPolicyConflict(t *testing.T) {
	s := mustNew()
	defer s.Close()
	a := elasticPolicy(core.FixedWindow, onSignal())
	b := a
	b.Elastic = &core.Elastic{CeilingPercent: 300, Signal: onSignal()}
	_, err := s.Take(context.Background(), "k", &a, hourStart, 1)
	require.NoError(t, err)
	_, err = s.Take(context.Background(), "k", &b, hourStart, 1)
	require.ErrorContains(t, err, "elastic ceiling")
}

// flipSignal has room on every other call.
type flipSignal struct {
	n, acquired, released atomic.Int64
}

func (s *flipSignal) Acquire(_ context.Context, cost int64) (bool, error) {
	if s.n.Add(1)%2 == 0 {
		return false, nil
	}
	s.acquired.Add(cost)
	return true, nil
}

func (s *flipSignal) Release(_ context.Context, cost int64) { s.released.Add(cost) }

// TestElasticSignalFlipsUnderConcurrency: 1,000 goroutines while the
// signal flips between room and none at every call: the nominal limit is
// exact, the ceiling is never passed, and every elastic admission holds
// capacity the signal handed out (none taken without room).
func TestElasticSignalFlipsUnderConcurrency(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s := mustNew()
			defer s.Close()
			sig := &flipSignal{}
			l, err := core.NewLimiter(s, elasticPolicy(alg, sig), core.WithClock(core.NewManualClock(hourStart)))
			require.NoError(t, err)
			var nominal, elastic atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 1000; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, err := l.Allow(context.Background(), "k")
					if !assert.NoError(t, err) {
						return
					}
					if d.Elastic {
						elastic.Add(1)
					} else if d.Allowed {
						nominal.Add(1)
					}
				}()
			}
			wg.Wait()
			assert.Equal(t, int64(100), nominal.Load())
			assert.LessOrEqual(t, elastic.Load(), int64(150))
			assert.Equal(t, sig.acquired.Load()-sig.released.Load(), elastic.Load())
			assert.Positive(t, elastic.Load())
		})
	}
}

// BenchmarkElasticWithinLimit: Limiter.Allow on one key within its limit,
// for a hard policy and the same policy with Elastic (whose signal is
// never asked within the limit).
func BenchmarkElasticWithinLimit(b *testing.B) {
	for _, el := range []bool{false, true} {
		name := "hard"
		if el {
			name = "elastic"
		}
		b.Run(name, func(b *testing.B) {
			s := mustNew()
			defer s.Close()
			p := core.Policy{Name: name, Limits: []core.Limit{core.Per(1<<30, 30*24*time.Hour)}}
			if el {
				p.Elastic = &core.Elastic{CeilingPercent: 150, Signal: onSignal()}
			}
			l := core.MustNewLimiter(s, p, core.WithClock(core.NewManualClock(hourStart)))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if d, err := l.Allow(ctx, "user:42"); err != nil || !d.Allowed {
					b.Fatal("denied", err)
				}
			}
		})
	}
}

// TestElasticDrain (issue 22): one key's burst of 200 concurrent requests
// keeps only the capacity of its elastic admissions; the rest goes to
// other clients.
func TestElasticDrain(t *testing.T) {
	storetest.ElasticDrain(t, func(t *testing.T) []core.Store {
		s := mustNew()
		t.Cleanup(func() { _ = s.Close() })
		return []core.Store{s}
	}, core.WithClock(core.NewManualClock(hourStart)))
}
