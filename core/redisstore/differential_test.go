package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/stretchr/testify/require"
)

// diffPolicies covers every algorithm, single and multi-limit, burst,
// buckets and every switch.
func diffPolicies() []core.Policy {
	algs := []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}
	var ps []core.Policy
	for _, a := range algs {
		base := func(name string, limits ...core.Limit) core.Policy {
			p := core.Policy{Name: a.String() + "/" + name, Algorithm: a, Limits: limits}
			if a == core.SlidingWindowCounter {
				p.Buckets = 4
			}
			return p
		}
		ps = append(ps,
			base("one", core.Per(5, time.Second)),
			base("two", core.Per(20, 15*time.Second), core.Per(5, time.Second)),
		)
		p := base("denied", core.Per(7, 2*time.Second))
		p.CountDenied = true
		ps = append(ps, p)
		p = base("denied2", core.Per(12, 10*time.Second), core.Per(4, time.Second))
		p.CountDenied = true
		ps = append(ps, p)
		p = base("soft", core.Per(10, time.Second), core.Per(30, 5*time.Second))
		p.SoftPercent = 30
		ps = append(ps, p)
		p = base("shadow", core.Per(3, time.Second))
		p.Shadow = true
		ps = append(ps, p)
		// single-limit soft overage and counted denials: the single-limit
		// scripts handle these themselves
		p = base("soft1", core.Per(8, 2*time.Second))
		p.SoftPercent = 25
		ps = append(ps, p)
		p = base("soft1-denied", core.Per(5, time.Second))
		p.SoftPercent, p.CountDenied = 40, true
		ps = append(ps, p)
		if a == core.FixedWindow || a == core.GCRA {
			// limits whose fixed-window moduli differ (2^20 needs a
			// smaller M than 2^33): each count is added with its own M
			ps = append(ps, base("moduli", core.Per(1<<20, time.Hour), core.Per(5, time.Second)))
		}
		if a == core.GCRA || a == core.TokenBucket {
			ps = append(ps, base("burst", core.Per(3, time.Second).WithBurst(9), core.Per(100, time.Minute).WithBurst(20)))
			ps = append(ps, base("burst1", core.Per(3, time.Second).WithBurst(9)))
			ps = append(ps, base("odd", core.Per(7, 1000003*time.Microsecond)))
		}
		if a == core.SlidingWindowCounter {
			p = base("one-bucket", core.Per(6, time.Second))
			p.Buckets = 1
			ps = append(ps, p)
			p = base("60", core.Per(40, 60*time.Second))
			p.Buckets = 60
			ps = append(ps, p)
		}
	}
	return slices.DeleteFunc(ps, func(p core.Policy) bool { return alreadyGeneric[p.Name] })
}

// TestDifferential runs random (time, cost) sequences through the store
// and through core's Decide and requires identical decisions, for every
// algorithm, multi-limit policies and every switch.
//
// Time is the wall clock plus an offset that only grows, so that the
// store's time never runs slower than Redis's expiry clock: keys then
// expire only once their state is back to full at the store's time, as
// ExpiresAt promises.
func TestDifferential(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for i, pol := range diffPolicies() {
		p := mustPolicy(t, pol)
		t.Run(p.Name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			r := newRef(p)
			w := p.Limits[len(p.Limits)-1].Window
			var offset time.Duration
			keys := []string{"alice", "bob"}
			var admitted, refused int
			for step := 0; step < 400; step++ {
				switch x := rng.IntN(10); {
				case x < 3: // same instant
				case x < 7:
					offset += time.Duration(rng.Int64N(int64(w / 5)))
				case x < 9:
					offset += time.Duration(rng.Int64N(int64(w)))
				default:
					offset += time.Duration(rng.Int64N(int64(3 * w)))
				}
				now := time.Now().Add(offset).Truncate(time.Microsecond)
				cost := int64(1)
				switch x := rng.IntN(10); {
				case x == 0:
					cost = 0
				case x < 3:
					cost = rng.Int64N(6)
				case x == 3:
					cost = rng.Int64N(40)
				}
				key := keys[rng.IntN(len(keys))]
				want := r.take(key, now, cost)
				got, err := s.Take(ctx, key, p, now, cost)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d key %s now %d cost %d", step, key, now.UnixMicro(), cost)
				if got.Allowed && !got.Shadowed {
					admitted++
				} else {
					refused++
				}
			}
			// the sequence must exercise both outcomes
			require.NotZero(t, admitted)
			require.NotZero(t, refused)
		})
	}
}

// TestDifferentialClockBack checks decisions when the clock goes back
// while the state is alive: every algorithm normalizes the state as core
// does (a tat, refill instant, window, bucket or log stamps after now).
func TestDifferentialClockBack(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	algs := []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}
	steps := []struct {
		at   time.Duration
		cost int64
	}{
		{0, 1}, {10 * time.Second, 2}, {5 * time.Second, 1}, {59 * time.Second, 3}, {61 * time.Second, 1},
		{30 * time.Second, 1}, {62 * time.Second, 4}, {61 * time.Second, 0}, {90 * time.Second, 2}, {70 * time.Second, 5},
		{80 * time.Second, 1}, {79 * time.Second, 1}, {119 * time.Second, 2}, {121 * time.Second, 1}, {100 * time.Second, 1},
		// a full window two ahead, a denial back in an earlier window, then the window between
		{185 * time.Second, 6}, {185 * time.Second, 6}, {100 * time.Second, 1}, {125 * time.Second, 1}, {126 * time.Second, 0},
	}
	for _, a := range algs {
		for _, cd := range []bool{false, true} {
			for nl, limits := range [][]core.Limit{{core.PerMinute(6)}, {core.Per(10, 2*time.Minute), core.PerMinute(6)}} {
				p := mustPolicy(t, core.Policy{Name: fmt.Sprintf("back/%s/%v/%d", a, cd, nl+1), Algorithm: a,
					Limits: limits, CountDenied: cd})
				if a == core.SlidingWindowCounter {
					p.Buckets = 6
				}
				t.Run(p.Name, func(t *testing.T) {
					r := newRef(p)
					for i, st := range steps {
						now := epoch.Add(st.at)
						want := r.take("k", now, st.cost)
						got, err := s.Take(ctx, "k", p, now, st.cost)
						require.NoError(t, err)
						require.Equal(t, want, got, "step %d at %v cost %d", i, st.at, st.cost)
					}
				})
			}
		}
	}
}

// TestStepTable pins a few decisions by hand (not derived from core), so a
// bug shared by core and the scripts cannot hide.
func TestStepTable(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	type row struct {
		at        time.Duration
		cost      int64
		allowed   bool
		remaining int64
		retry     time.Duration
	}
	tests := []struct {
		name string
		p    core.Policy
		rows []row
	}{
		{"gcra 2/s", core.Policy{Algorithm: core.GCRA, Limits: []core.Limit{core.PerSecond(2)}}, []row{
			{0, 1, true, 1, 0}, {0, 1, true, 0, 0}, {0, 1, false, 0, 500 * time.Millisecond},
			{500 * time.Millisecond, 1, true, 0, 0}, {time.Second, 3, false, 0, core.Never},
		}},
		{"fixed 3/min", core.Policy{Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(3)}}, []row{
			{0, 2, true, 1, 0}, {10 * time.Second, 1, true, 0, 0}, {20 * time.Second, 1, false, 0, 40 * time.Second},
			{60 * time.Second, 3, true, 0, 0},
		}},
		{"token bucket 2/s", core.Policy{Algorithm: core.TokenBucket, Limits: []core.Limit{core.PerSecond(2)}}, []row{
			{0, 2, true, 0, 0}, {100 * time.Millisecond, 1, false, 0, 400 * time.Millisecond}, {500 * time.Millisecond, 1, true, 0, 0},
		}},
		{"log 2/10s", core.Policy{Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(2, 10*time.Second)}}, []row{
			{0, 1, true, 1, 0}, {3 * time.Second, 1, true, 0, 0}, {5 * time.Second, 1, false, 0, 5 * time.Second},
			{10 * time.Second, 1, true, 0, 0}, {11 * time.Second, 1, false, 0, 2 * time.Second},
		}},
		{"two limits, nothing consumed on denial", core.Policy{Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(100), core.PerSecond(1)}}, []row{
			{0, 1, true, 0, 0}, {0, 1, false, 0, time.Second}, {0, 1, false, 0, time.Second}, {time.Second, 1, true, 0, 0},
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.Name = fmt.Sprintf("table%d", i)
			p := mustPolicy(t, tt.p)
			for j, r := range tt.rows {
				d, err := s.Take(ctx, "k", p, epoch.Truncate(time.Hour).Add(r.at), r.cost)
				require.NoError(t, err)
				require.Equal(t, r.allowed, d.Allowed, "row %d", j)
				require.Equal(t, r.remaining, d.Remaining, "row %d", j)
				require.Equal(t, r.retry, d.RetryAfter, "row %d", j)
			}
		})
	}
}

// TestDifferentialLargeCounts drives counts past the compact encodings'
// limits (a token bucket deficit of 1000 and more, a fixed-window count
// of 10^9 and more), where the state falls back to "a:b" strings, and
// back, for single- and two-limit policies.
func TestDifferentialLargeCounts(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	big := core.Per(1_500_000_000, time.Hour)
	for _, pol := range []core.Policy{
		{Name: "big/tb", Algorithm: core.TokenBucket, Limits: []core.Limit{core.Per(5000, time.Second)}},
		{Name: "big/tb-burst", Algorithm: core.TokenBucket, Limits: []core.Limit{core.Per(3, time.Second).WithBurst(2500)}},
		{Name: "big/tb-2", Algorithm: core.TokenBucket, Limits: []core.Limit{core.Per(5000, time.Second), core.Per(9000, time.Minute)}},
		{Name: "big/fw", Algorithm: core.FixedWindow, Limits: []core.Limit{big}},
		{Name: "big/fw-denied", Algorithm: core.FixedWindow, CountDenied: true, Limits: []core.Limit{big}},
		{Name: "big/fw-2", Algorithm: core.FixedWindow, Limits: []core.Limit{big, core.Per(2_000_000_000, 2*time.Hour)}},
		{Name: "big/gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(1_000_000, time.Second)}},
	} {
		p := mustPolicy(t, pol)
		t.Run(p.Name, func(t *testing.T) {
			r := newRef(p)
			capa := p.Limits[0].Requests
			if b := p.Limits[0].Burst; b > 0 {
				capa = b
			}
			costs := []int64{1, 999, 1000, 1001, capa / 3, capa / 2, capa - 1, 7, capa, capa + 1, 0, 999_999_999, 1_000_000_000, 1}
			now := epoch
			for i, cost := range append(costs, costs...) {
				now = now.Add(time.Duration(i%4) * 137 * time.Millisecond)
				want := r.take("k", now, cost)
				got, err := s.Take(ctx, "k", p, now, cost)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d cost %d", i, cost)
			}
		})
	}
}

// TestDifferentialLargeLog drives logs of more than 256 slots, which the
// scripts read and write slot by slot (GETRANGE, SETRANGE) rather than
// whole, through random traffic with large costs, huge costs and clock
// steps back, single and multi-limit (one ring large, one small), writes
// of more than one SETRANGE chunk (1024 slots), and requires core's
// decisions.
func TestDifferentialLargeLog(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for i, pol := range []core.Policy{
		{Name: "biglog/one", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(3000, 10*time.Second)}},
		{Name: "biglog/denied", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.Per(2500, 10*time.Second)}},
		{Name: "biglog/small", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.Per(300, 10*time.Second)}},
		{Name: "biglog/chunks", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.Per(5000, 10*time.Second)}},
		{Name: "biglog/two", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(4000, 20*time.Second), core.Per(60, time.Second)}},
		{Name: "biglog/two-denied", Algorithm: core.SlidingWindowLog, CountDenied: true, SoftPercent: 10,
			Limits: []core.Limit{core.Per(2500, 20*time.Second), core.Per(150, 2*time.Second)}},
	} {
		p := mustPolicy(t, pol)
		t.Run(p.Name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 77))
			r := newRef(p)
			now := epoch
			outcomes := map[bool]int{}
			for step := 0; step < 600; step++ {
				switch x := rng.IntN(20); {
				case x < 6: // same instant
				case x < 15:
					now = now.Add(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))
				case x < 18:
					now = now.Add(time.Duration(rng.Int64N(int64(5 * time.Second))))
				case x == 18:
					now = now.Add(-time.Duration(rng.Int64N(int64(30 * time.Second)))) // the clock steps back
				default:
					now = now.Add(time.Duration(rng.Int64N(int64(30 * time.Second))))
				}
				cost := int64(1)
				switch x := rng.IntN(10); {
				case x == 0:
					cost = 0
				case x < 4:
					cost = rng.Int64N(80)
				case x == 4:
					cost = rng.Int64N(p.Limits[0].Requests*6/5 + 1)
				case x == 5 && rng.IntN(4) == 0:
					cost = 1<<62 + rng.Int64N(1000)
				}
				key := []string{"a", "b"}[rng.IntN(2)]
				want := r.take(key, now, cost)
				got, err := s.Take(ctx, key, p, now, cost)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d key %s at %v cost %d", step, key, now.Sub(epoch), cost)
				outcomes[got.Allowed]++
			}
			require.Greater(t, outcomes[true], 50)
			require.Greater(t, outcomes[false], 50)
		})
	}
}

// TestDifferentialLogGrowsPastWhole: in one decision, a small ring (read
// and rewritten whole) is first restamped after the clock went back, then
// grows past 256 slots (written slot by slot from there): the restamped
// slots must reach Redis too.
func TestDifferentialLogGrowsPastWhole(t *testing.T) {
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	p := mustPolicy(t, core.Policy{Name: "grow", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(1000, time.Minute)}})
	r := newRef(p)
	steps := []struct {
		at   time.Duration
		cost int64
	}{{0, 10}, {-5 * time.Second, 500}, {-4 * time.Second, 0}, {-4 * time.Second, 495}, {55 * time.Second, 600}, {56 * time.Second, 1}, {61 * time.Second, 400}}
	for i, st := range steps {
		now := epoch.Add(st.at)
		want := r.take("k", now, st.cost)
		got, err := s.Take(ctx, "k", p, now, st.cost)
		require.NoError(t, err)
		require.Equal(t, want, got, "step %d at %v cost %d", i, st.at, st.cost)
	}
}
