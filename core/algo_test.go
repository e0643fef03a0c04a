package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// base is a whole second, so fixed windows and counter buckets start on it.
var base = time.Unix(1_767_000_000, 0).UnixMicro()

const ms = int64(1000)

type step struct {
	at        int64 // µs after base
	cost      int64
	allowed   bool
	remaining int64
	retry     time.Duration // 0 when allowed
	reset     time.Duration // -1: not checked
}

func runSteps(t *testing.T, p Policy, steps []step) {
	t.Helper()
	c, err := p.Compile()
	require.NoError(t, err)
	st := make([]int64, c.StateWords())
	for i, s := range steps {
		d := c.Decide(st, base+s.at, s.cost)
		assert.Equal(t, s.allowed, d.Allowed, "step %d allowed", i)
		assert.Equal(t, s.remaining, d.Remaining, "step %d remaining", i)
		assert.Equal(t, s.retry, d.RetryAfter, "step %d retry-after", i)
		if s.reset >= 0 {
			assert.Equal(t, s.reset, d.ResetAfter, "step %d reset-after", i)
		}
		assert.Equal(t, p.Name, d.Policy)
	}
}

func TestStepsGCRA(t *testing.T) {
	runSteps(t, Policy{Name: "g", Algorithm: GCRA, Limits: []Limit{PerSecond(2)}}, []step{
		{0, 1, true, 1, 0, 500 * time.Millisecond},
		{0, 1, true, 0, 0, time.Second},
		{0, 1, false, 0, 500 * time.Millisecond, time.Second},
		{500 * ms, 1, true, 0, 0, time.Second},
		{500 * ms, 2, false, 0, time.Second, -1},
		{3000 * ms, 0, true, 2, 0, 0},
		{3000 * ms, 3, false, 0, Never, -1}, // Remaining is 0 on every denial
	})
}

func TestStepsGCRABurst(t *testing.T) {
	// 1 per second with a burst of 3: three at once, then one a second.
	runSteps(t, Policy{Name: "g", Algorithm: GCRA, Limits: []Limit{PerSecond(1).WithBurst(3)}}, []step{
		{0, 3, true, 0, 0, 3 * time.Second},
		{0, 1, false, 0, time.Second, -1},
		{999 * ms, 1, false, 0, time.Millisecond, -1},
		{1000 * ms, 1, true, 0, 0, 3 * time.Second},
	})
}

func TestStepsTokenBucket(t *testing.T) {
	runSteps(t, Policy{Name: "tb", Algorithm: TokenBucket, Limits: []Limit{PerSecond(2).WithBurst(3)}}, []step{
		{0, 3, true, 0, 0, 1500 * time.Millisecond},
		{0, 1, false, 0, 500 * time.Millisecond, -1},
		{499 * ms, 1, false, 0, time.Millisecond, -1},
		{500 * ms, 1, true, 0, 0, 1500 * time.Millisecond},
		{1700 * ms, 2, true, 0, 0, 1300 * time.Millisecond},
		{1700 * ms, 4, false, 0, Never, -1},
	})
}

func TestStepsFixedWindow(t *testing.T) {
	runSteps(t, Policy{Name: "fw", Algorithm: FixedWindow, Limits: []Limit{PerSecond(3)}}, []step{
		{0, 1, true, 2, 0, time.Second},
		{100 * ms, 2, true, 0, 0, 900 * time.Millisecond},
		{200 * ms, 1, false, 0, 800 * time.Millisecond, 800 * time.Millisecond},
		{999 * ms, 1, false, 0, time.Millisecond, -1},
		{1000 * ms, 3, true, 0, 0, time.Second},
		{1500 * ms, 4, false, 0, Never, -1},
	})
}

func TestStepsSlidingLog(t *testing.T) {
	runSteps(t, Policy{Name: "log", Algorithm: SlidingWindowLog, Limits: []Limit{PerSecond(3)}}, []step{
		{0, 1, true, 2, 0, time.Second},
		{200 * ms, 1, true, 1, 0, time.Second},
		{400 * ms, 1, true, 0, 0, time.Second},
		{600 * ms, 1, false, 0, 400 * time.Millisecond, 800 * time.Millisecond},
		{1000 * ms, 1, true, 0, 0, time.Second},
		{1000 * ms, 2, false, 0, 400 * time.Millisecond, -1},
		{1000 * ms, 4, false, 0, Never, -1},
		// every entry stale: the key is full, and a cost above the
		// capacity is reset in 0, not a negative span
		{5000 * ms, 4, false, 0, Never, 0},
	})
}

func TestStepsSlidingCounter(t *testing.T) {
	runSteps(t, Policy{Name: "sc", Algorithm: SlidingWindowCounter, Limits: []Limit{PerSecond(10)}}, []step{
		{0, 10, true, 0, 0, 2 * time.Second},
		// 1.5 s: previous bucket weighs half: 10 × 0.5 = 5.
		{1500 * ms, 5, true, 0, 0, 1500 * time.Millisecond},
		// estimate 5 + 5 = 10; room for 1 when 10 × (1 − x) ≤ 4, x = 0.6 s.
		{1500 * ms, 1, false, 0, 100 * time.Millisecond, -1},
		{1599 * ms, 1, false, 0, time.Millisecond, -1},
		{1600 * ms, 1, true, 0, 0, -1},
		{1600 * ms, 11, false, 0, Never, -1},
	})
}

func TestStepsSlidingCounterBuckets(t *testing.T) {
	// 6 per 3 s in 3 buckets of 1 s: at 3.5 s the window holds buckets 1, 2,
	// 3 fully and bucket 0 at half weight.
	runSteps(t, Policy{Name: "sc", Algorithm: SlidingWindowCounter, Buckets: 3, Limits: []Limit{Per(6, 3*time.Second)}}, []step{
		{0, 4, true, 2, 0, 4 * time.Second},
		{1000 * ms, 2, true, 0, 0, 4 * time.Second}, // bucket 1 leaves at 5 s
		{2000 * ms, 1, false, 0, time.Second + 250*time.Millisecond, -1},
		// at 3.25 s: 2 + 4×0.75 = 5 ≤ 5
		{3250 * ms, 1, true, 0, 0, -1},
	})
}

func TestMultiLimitDeniedConsumesNothing(t *testing.T) {
	p := Policy{Name: "m", Algorithm: GCRA, Limits: []Limit{Per(900, 15*time.Minute), PerMinute(200)}}
	c, err := p.Compile()
	require.NoError(t, err)
	st := make([]int64, c.StateWords())
	for i := 0; i < 200; i++ {
		require.True(t, c.Decide(st, base, 1).Allowed)
	}
	before := append([]int64(nil), st...)
	for i := 0; i < 100; i++ {
		d := c.Decide(st, base, 1)
		require.False(t, d.Allowed)
		assert.Equal(t, PerMinute(200), d.Limit)
		assert.Equal(t, 300*time.Millisecond, d.RetryAfter, "one per-minute emission interval")
	}
	assert.Equal(t, before, st, "denials consumed nothing in either limit")
	d := c.Decide(st, base, 0)
	assert.Equal(t, int64(0), d.Remaining)
	// the 15-minute limit's TAT is 200 emission intervals (1 s each) ahead:
	// exactly the 200 admitted, none of the 100 denied
	assert.Equal(t, base+200_000*ms, st[0])
	d = c.Decide(st, base+60_000*ms, 0)
	assert.Equal(t, PerMinute(200), d.Limit, "a minute later the per-minute limit is full again and still binds")
	assert.Equal(t, int64(200), d.Remaining)
}

func TestSwitches(t *testing.T) {
	t.Run("soft", func(t *testing.T) {
		p := Policy{Name: "s", Algorithm: FixedWindow, SoftPercent: 10, Limits: []Limit{PerMinute(100)}}
		c, _ := p.Compile()
		st := make([]int64, 1)
		n := 0
		var last Decision
		for i := 0; i < 200; i++ {
			if d := c.Decide(st, base, 1); d.Allowed {
				n++
				last = d
			}
		}
		assert.Equal(t, 110, n, "10% over 100 is tolerated")
		assert.Equal(t, int64(0), last.Remaining, "remaining counts to 0 at the nominal limit")
		assert.Equal(t, PerMinute(100), last.Limit, "the nominal limit is reported")
	})
	t.Run("shadow", func(t *testing.T) {
		p := Policy{Name: "s", Algorithm: GCRA, Shadow: true, Limits: []Limit{PerSecond(1)}}
		c, _ := p.Compile()
		st := make([]int64, 1)
		d := c.Decide(st, base, 1)
		assert.True(t, d.Allowed)
		assert.False(t, d.Shadowed)
		d = c.Decide(st, base, 1)
		assert.True(t, d.Allowed, "shadow never denies")
		assert.True(t, d.Shadowed, "but says it would have")
		assert.Equal(t, time.Second, d.RetryAfter)
		assert.Equal(t, base+time.Second.Microseconds(), st[0], "a shadowed denial consumes nothing")
	})
	t.Run("count denied", func(t *testing.T) {
		p := Policy{Name: "s", Algorithm: FixedWindow, CountDenied: true, Limits: []Limit{PerSecond(2)}}
		q := Policy{Name: "s", Algorithm: SlidingWindowLog, CountDenied: true, Limits: []Limit{PerSecond(2)}}
		c, _ := q.Compile()
		st := make([]int64, c.StateWords())
		c.Decide(st, base, 2)
		// hammering keeps the window full: still denied 900 ms after the last attempt
		for at := int64(100); at <= 2000; at += 100 {
			require.False(t, c.Decide(st, base+at*ms, 1).Allowed, "at %d ms", at)
		}
		// the attempts at 1.9 s and 2 s fill the window until 2.9 s (a probe
		// before then would itself count)
		assert.True(t, c.Decide(st, base+2900*ms, 1).Allowed, "once the older attempt leaves the window")
		// Fixed window: one unit admitted leaves room for one more; the
		// denied cost 5 fills the window only when denials count.
		for _, counted := range []bool{true, false} {
			p.CountDenied = counted
			c, err := p.Compile()
			require.NoError(t, err)
			st = make([]int64, 1)
			require.True(t, c.Decide(st, base, 1).Allowed)
			require.False(t, c.Decide(st, base, 5).Allowed)
			assert.Equal(t, !counted, c.Decide(st, base+500*ms, 1).Allowed,
				"CountDenied %v: the denial keeps the window full only when it counts", counted)
			assert.True(t, c.Decide(st, base+1000*ms, 2).Allowed, "CountDenied %v: the next window starts afresh", counted)
		}
	})
}

func TestValidate(t *testing.T) {
	bad := []struct {
		p    Policy
		want string
	}{
		{Policy{}, "name is empty"},
		{Policy{Name: "x"}, "no limits"},
		{Policy{Name: "a b", Limits: []Limit{PerSecond(1)}}, "not allowed"},
		{Policy{Name: "x", Limits: []Limit{{Requests: 0, Window: time.Second}}}, "requests must be > 0"},
		{Policy{Name: "x", Limits: []Limit{{Requests: 1}}}, "window must be >= 1µs"},
		{Policy{Name: "x", Limits: []Limit{PerSecond(2_000_000)}}, "resolution"},
		{Policy{Name: "x", Algorithm: FixedWindow, Limits: []Limit{PerSecond(2).WithBurst(5)}}, "burst applies"},
		{Policy{Name: "x", Algorithm: SlidingWindowCounter, Buckets: 7, Limits: []Limit{PerSecond(2)}}, "does not divide"},
		{Policy{Name: "x", Buckets: 2, Limits: []Limit{PerSecond(2)}}, "sliding_counter only"},
		{Policy{Name: "x", SoftPercent: -1, Limits: []Limit{PerSecond(2)}}, "soft_percent"},
		{Policy{Name: "x", Algorithm: SlidingWindowLog, Limits: []Limit{PerHour(1_000_000)}}, "sliding counter"},
		{Policy{Name: "x", Algorithm: 9, Limits: []Limit{PerSecond(2)}}, "unknown algorithm"},
	}
	for _, b := range bad {
		err := b.p.Validate()
		if assert.Error(t, err, "%+v", b.p) {
			assert.Contains(t, err.Error(), b.want)
		}
	}
	assert.NoError(t, (&Policy{Name: "ok", Algorithm: SlidingWindowCounter, Buckets: 60, Limits: []Limit{PerHour(1000)}}).Validate())
}

func TestLimitString(t *testing.T) {
	assert.Equal(t, "900 per 15m", Per(900, 15*time.Minute).String())
	assert.Equal(t, "200 per 1m", PerMinute(200).String())
	assert.Equal(t, "10 per 1s burst 20", PerSecond(10).WithBurst(20).String())
	assert.Equal(t, "5 per 24h", PerDay(5).String())
	assert.Equal(t, "1 per 1h30m", Per(1, 90*time.Minute).String())
}

func TestAlgorithmText(t *testing.T) {
	for a := GCRA; a < numAlgorithms; a++ {
		b, err := a.MarshalText()
		require.NoError(t, err)
		var back Algorithm
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, a, back)
	}
	_, err := parseAlgorithm("leaky")
	assert.ErrorContains(t, err, "unknown algorithm")
	a, err := parseAlgorithm("Sliding-Counter")
	require.NoError(t, err)
	assert.Equal(t, SlidingWindowCounter, a)
}

func TestExpiresAt(t *testing.T) {
	for _, p := range modelPolicies {
		c, _ := p.Compile()
		st := make([]int64, c.StateWords())
		assert.Zero(t, c.ExpiresAt(st, base), "%s: fresh", p.Name)
		c.Decide(st, base+1, 1)
		exp := c.ExpiresAt(st, base+1)
		assert.Greater(t, exp, base+1, p.Name)
		assert.LessOrEqual(t, exp, base+1+p.Limits[0].Window.Microseconds()*2, p.Name)
		assert.Equal(t, exp, c.ExpiresAt(st, exp+1000_000_000), "%s: ExpiresAt does not move with now", p.Name)
		// at ExpiresAt the key is back to full: as a fresh key would be
		fresh := make([]int64, len(st))
		assert.Equal(t, c.Decide(fresh, exp, 0), c.Decide(st, exp, 0), p.Name)
	}
}

func TestSlidingLogNearEpoch(t *testing.T) {
	// empty ring slots are never inside the window, even when now < W
	p := Policy{Name: "l", Algorithm: SlidingWindowLog, Limits: []Limit{PerMinute(3)}}
	c, _ := p.Compile()
	st := make([]int64, c.StateWords())
	for i := 0; i < 3; i++ {
		require.True(t, c.Decide(st, 1000, 1).Allowed, "request %d at 1 ms after the epoch", i)
	}
	assert.False(t, c.Decide(st, 1000, 1).Allowed)
}

func TestValidateSpan(t *testing.T) {
	p := Policy{Name: "x", Limits: []Limit{Per(1, 366*24*time.Hour).WithBurst(1_000_000)}}
	assert.ErrorContains(t, p.Validate(), "exceeds 30 years")
}
