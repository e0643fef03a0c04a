package core

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// maxWait is the longest RetryAfter limit k may answer for a cost within
// its capacity, from any state: two full refills (GCRA, token bucket), two
// windows (fixed window, log), two windows and a bucket
// (sliding counter). The second refill or window is the margin within
// which a state ahead of now stays in force (see the write modes' doc).
func maxWait(c *Compiled, k *plan) int64 {
	switch c.p.Algorithm {
	case GCRA, TokenBucket:
		return 2 * k.tau
	case SlidingWindowCounter:
		return 2*k.w + k.bl
	}
	return 2 * k.w
}

// extremePolicy builds a single-limit policy from raw (possibly hostile)
// numbers; ok is false when validation refuses it.
func extremePolicy(alg uint8, req, windowUs, burst int64, buckets, soft uint16, countDenied bool) (*Compiled, bool) {
	a := Algorithm(alg % uint8(numAlgorithms))
	l := Limit{Requests: req, Window: time.Duration(windowUs) * time.Microsecond}
	p := Policy{Name: "x", Algorithm: a, CountDenied: countDenied, SoftPercent: int(soft % 1001)}
	switch a {
	case GCRA, TokenBucket:
		l.Burst = burst
	case SlidingWindowCounter:
		p.Buckets = int(buckets % (maxBuckets + 1))
	case SlidingWindowLog:
		l.Requests = req % 3000 // the property does not depend on the size; keep runs fast
	}
	p.Limits = []Limit{l}
	c, err := p.Compile()
	return c, err == nil
}

// checkExtreme decides cost at now on st and checks the properties every
// decision must have: a cost above the capacity is denied with Never and
// consumes nothing (or, under CountDenied, what capacity + 1 would); no
// decision hands quota back; a cost within the capacity never waits longer
// than the policy allows.
func checkExtreme(t *testing.T, c *Compiled, st []int64, now, cost int64) Decision {
	t.Helper()
	k := &c.limits[0]
	// normalize first (a peek), so "before" is the state the decision sees
	c.Decide(st, now, 0)
	before := append([]int64(nil), st...)
	remBefore := c.Decide(slices.Clone(st), now, 0).Remaining
	d := c.Decide(st, now, cost)
	remAfter := c.Decide(slices.Clone(st), now, 0).Remaining
	require.LessOrEqual(t, remAfter, remBefore, "cost %d handed quota back", cost)
	if cost > k.capa {
		require.False(t, d.Allowed, "cost %d above capacity %d admitted", cost, k.capa)
		require.Equal(t, Never, d.RetryAfter, "cost %d above capacity %d", cost, k.capa)
		// slices.Equal first: require.Equal's reflection over a log of
		// thousands of entries was most of this test's time under -race
		if !c.p.CountDenied {
			if !slices.Equal(before, st) {
				require.Equal(t, before, st, "a denied cost %d changed the state", cost)
			}
		} else {
			ref := slices.Clone(before)
			c.Decide(ref, now, k.capa+1)
			if !slices.Equal(ref, st) {
				require.Equal(t, ref, st, "cost %d must count as capacity + 1", cost)
			}
		}
		return d
	}
	if !d.Allowed && cost > 0 {
		require.NotEqual(t, Never, d.RetryAfter, "cost %d within capacity %d", cost, k.capa)
		require.LessOrEqual(t, d.RetryAfter.Microseconds(), maxWait(c, k), "a wait longer than the policy allows")
	}
	require.GreaterOrEqual(t, d.ResetAfter, time.Duration(0))
	return d
}

var hugeCosts = []int64{1 << 31, 1<<31 + 1, 1 << 53, 1<<53 + 1, 1 << 58, 1 << 62, math.MaxInt64 - 1, math.MaxInt64}

// TestHugeCostsProperty: for every algorithm, random limits up to the
// validation bounds, random instants up to and past MaxNow, random prior
// traffic with clock steps back, and costs up to MaxInt64, checkExtreme's
// properties hold.
func TestHugeCostsProperty(t *testing.T) {
	for alg := range uint8(numAlgorithms) {
		t.Run(Algorithm(alg).String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(alg), 3))
			for n := 0; n < 300; n++ {
				req := []int64{1, 2, 7, 100, 1000, maxRequests, rng.Int64N(maxRequests) + 1}[rng.IntN(7)]
				win := []int64{1, 1000, 1_000_000, 3_600_000_000, 366 * 24 * 3_600_000_000, rng.Int64N(366*24*3_600_000_000) + 1}[rng.IntN(6)]
				c, ok := extremePolicy(alg, req, win, rng.Int64N(3)*rng.Int64N(maxRequests), uint16(rng.IntN(4000)), uint16(rng.IntN(3)*rng.IntN(1001)), rng.IntN(2) == 0)
				if !ok {
					continue
				}
				st := make([]int64, c.StateWords())
				now := []int64{0, 1, base, MaxNow - 1, MaxNow, math.MaxInt64, rng.Int64N(MaxNow)}[rng.IntN(7)]
				for i := 0; i < 20; i++ {
					switch rng.IntN(4) {
					case 0:
						now -= rng.Int64N(c.limits[0].w + 1) // the clock steps back
					case 1:
						now += rng.Int64N(c.limits[0].w/4 + 1)
					}
					now = min(max(now, 0), math.MaxInt64/2)
					cost := rng.Int64N(4)
					if rng.IntN(3) == 0 {
						cost = rng.Int64N(c.limits[0].capa + 2)
					}
					checkExtreme(t, c, st, now, cost)
				}
				for _, cost := range append(hugeCosts, c.limits[0].capa+1, c.limits[0].capa+2) {
					checkExtreme(t, c, st, now, cost)
				}
			}
		})
	}
}

// FuzzExtremes: hostile limits, instants and costs, with a clock that
// jumps both ways; nothing panics or overflows and checkExtreme's
// properties hold.
func FuzzExtremes(f *testing.F) {
	f.Add(uint8(0), int64(100), int64(60_000_000), int64(0), uint16(0), uint16(0), false, base, int64(math.MaxInt64), []byte{1, 2, 200, 3})
	f.Add(uint8(3), int64(100), int64(60_000_000), int64(0), uint16(0), uint16(0), true, base, int64(1<<62), []byte{5, 5, 5})
	f.Add(uint8(4), int64(1000), int64(3_600_000_000), int64(0), uint16(3600), uint16(50), false, int64(MaxNow), int64(1<<58), []byte{0, 255})
	f.Add(uint8(2), int64(maxRequests), int64(1), int64(0), uint16(0), uint16(0), true, int64(math.MaxInt64), int64(math.MaxInt64), []byte{})
	f.Fuzz(func(t *testing.T, alg uint8, req, win, burst int64, buckets, soft uint16, countDenied bool, now, cost int64, steps []byte) {
		c, ok := extremePolicy(alg, req, win, burst, buckets, soft, countDenied)
		if !ok {
			return
		}
		st := make([]int64, c.StateWords())
		t0 := now
		for i, b := range steps {
			if i >= 64 {
				break
			}
			// a step of up to ±2 windows, and a small cost
			t0 += (int64(int8(b)) * c.limits[0].w) / 64
			t0 = min(max(t0, 0), math.MaxInt64/2)
			checkExtreme(t, c, st, t0, int64(b%4))
		}
		checkExtreme(t, c, st, t0, cost)
		checkExtreme(t, c, st, now, cost)
	})
}

// TestClockBackGCRA pins the case: 100 per minute, one request,
// then the clock steps back 2 minutes or an hour. The stored tat is read
// as an empty bucket at the new time: the next request waits one emission
// interval (600 ms), not a minute or 59 minutes.
func TestClockBackGCRA(t *testing.T) {
	for _, back := range []time.Duration{2 * time.Minute, time.Hour} {
		p := Policy{Name: "g", Algorithm: GCRA, Limits: []Limit{PerMinute(100)}}
		steps := []step{
			{0, 1, true, 99, 0, 600 * time.Millisecond},
			{-back.Microseconds(), 1, false, 0, 600 * time.Millisecond, time.Minute},
			{-back.Microseconds() + 600*ms, 1, true, 0, 0, time.Minute},
			{-back.Microseconds() + time.Minute.Microseconds() + 600*ms, 0, true, 100, 0, 0}, // full again a minute on
		}
		t.Run(back.String(), func(t *testing.T) { runSteps(t, p, steps) })
	}
}

// TestClockBackTokenBucket: after a step back, the tokens left are still
// there, and the refill never waits more than a full refill time.
func TestClockBackTokenBucket(t *testing.T) {
	p := Policy{Name: "tb", Algorithm: TokenBucket, Limits: []Limit{PerMinute(100)}}
	back := -time.Hour.Microseconds()
	runSteps(t, p, []step{
		{0, 1, true, 99, 0, -1},
		{back, 0, true, 99, 0, time.Minute}, // the refill clock moved to back + 99 × 600 ms
		{back, 99, true, 0, 0, -1},
		// the refill clock, 59.4 s ahead, is within a full refill of now:
		// it stays in force
		{back, 1, false, 0, 60 * time.Second, -1},
		{back + time.Minute.Microseconds(), 1, true, 0, 0, -1},
	})
}

// TestLateInstantsHandNothingBack guards against normalizing what
// concurrency produces: callers read the clock, then reach the state in
// another order, so a state may lie a little ahead of a caller's now.
// Treating that as a clock gone back handed the lateness back as quota at
// every race (GCRA lost its tat, a fixed window carried its count back and
// then restarted). Hammering with instants up to half a window late must
// admit no more than the policy allows over the span the instants cover.
func TestLateInstantsHandNothingBack(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, TokenBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			p := Policy{Name: "late", Algorithm: alg, Limits: []Limit{PerSecond(10)}}
			if alg == SlidingWindowCounter {
				p.Buckets = 10
			}
			c, err := p.Compile()
			require.NoError(t, err)
			st := make([]int64, c.StateWords())
			rng := rand.New(rand.NewPCG(1, uint64(alg)))
			const w = int64(1_000_000)
			const span = 20 * w
			const late = w / 2
			start := int64(1_700_000_000) * w
			admitted := int64(0)
			for true_ := start; true_ < start+span; true_ += 997 {
				now := true_ - rng.Int64N(late) // read the clock up to half a window before reaching the state
				if c.Decide(st, now, 1).Allowed {
					admitted++
				}
			}
			// GCRA and the token bucket: the burst plus the refill over the
			// span the instants cover; the windows: one limit per window
			// those instants touch.
			bound := int64(10) + (span+late)/(w/10)
			if alg != GCRA && alg != TokenBucket {
				bound = 10 * ((span+late)/w + 2)
			}
			require.LessOrEqual(t, admitted, bound, "late instants handed quota back")
			require.GreaterOrEqual(t, admitted, int64(10)*(span/w)-10, "and the limit still admits")
		})
	}
}
