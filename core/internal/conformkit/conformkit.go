// Package conformkit holds what the store conformance suite
// (core/storetest) and the in-module stores' own tests share: the
// suite's fixed epoch and policies, core's model of the quota verbs on a
// plain state, the costliest multi-limit policy, and the stores'
// worst-case benchmark patterns (WorstCases). Test support only.
package conformkit

import (
	"math"
	"time"

	"github.com/limitkit/limitkit/core"
)

// Epoch is the suite's base time (a fixed instant, so runs repeat).
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Policies is one policy per algorithm plus the switches and a two-limit
// policy, small enough that random traffic hits every branch.
func Policies() []core.Policy {
	return []core.Policy{
		{Name: "gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(5, time.Second)}},
		{Name: "gcra-burst", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(3, time.Second).WithBurst(7)}},
		{Name: "tb", Algorithm: core.TokenBucket, Limits: []core.Limit{core.Per(4, time.Second).WithBurst(6)}},
		{Name: "fw", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(6, time.Second)}},
		{Name: "log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(6, time.Second)}},
		{Name: "sc1", Algorithm: core.SlidingWindowCounter, Limits: []core.Limit{core.Per(6, time.Second)}},
		{Name: "sc10", Algorithm: core.SlidingWindowCounter, Buckets: 10, Limits: []core.Limit{core.Per(8, time.Second)}},
		{Name: "gcra-2", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(9, 15*time.Second), core.Per(4, time.Second)}},
		{Name: "fw-2", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(9, 15*time.Second), core.Per(4, time.Second)}},
		{Name: "log-2", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.Per(9, 15*time.Second), core.Per(4, time.Second)}},
		{Name: "sc-2", Algorithm: core.SlidingWindowCounter, Buckets: 5, Limits: []core.Limit{core.Per(9, 15*time.Second), core.Per(4, time.Second)}},
		{Name: "tb-2", Algorithm: core.TokenBucket, Limits: []core.Limit{core.Per(9, 15*time.Second), core.Per(4, time.Second)}},
		{Name: "gcra-soft", Algorithm: core.GCRA, SoftPercent: 50, Limits: []core.Limit{core.Per(4, time.Second)}},
		{Name: "fw-counted", Algorithm: core.FixedWindow, CountDenied: true, Limits: []core.Limit{core.Per(4, time.Second)}},
		{Name: "log-counted", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.Per(4, time.Second)}},
		{Name: "sc-counted", Algorithm: core.SlidingWindowCounter, Buckets: 4, CountDenied: true, Limits: []core.Limit{core.Per(4, time.Second)}},
		{Name: "gcra-counted", Algorithm: core.GCRA, CountDenied: true, Limits: []core.Limit{core.Per(4, time.Second)}},
		{Name: "tb-counted", Algorithm: core.TokenBucket, CountDenied: true, Limits: []core.Limit{core.Per(4, time.Second)}},
		{Name: "fw-shadow", Algorithm: core.FixedWindow, Shadow: true, Limits: []core.Limit{core.Per(3, time.Second)}},
	}
}

// ApplyVerb applies the verb named by v to the plain state st with core's
// model, what a store must do under its lock or in its script: 'A' a
// decision, 'P' a peek, 'C' a charge, 'R' a refund, 'W' a reservation
// at most maxWait µs ahead, 'X' a reset. now and maxWait are in
// microseconds. The stores' differential verb tests compare with it.
func ApplyVerb(c *core.Compiled, st []int64, v byte, now, cost, maxWait int64) (d core.Decision) {
	switch v {
	case 'A':
		c.DecideTo(&d, st, now, cost)
	case 'P':
		c.PeekTo(&d, st, make([]int64, len(st)), now, cost)
	case 'C':
		c.ChargeTo(&d, st, now, cost)
	case 'R':
		c.RefundTo(&d, st, now, cost)
	case 'W':
		c.ReserveTo(&d, st, now, cost, maxWait)
	case 'X':
		clear(st)
	}
	return d
}

// WorstMultiLimits is the limits of the costliest multi-limit sliding
// counter validation accepts, with 75 buckets each (8 × 75 = 600, the
// bound on the buckets of all limits): 8 limits (the most a policy may have) that never
// deny, over windows of 75 s to 600 s, which 75 buckets divide. The
// stores' BenchmarkWorstCase runs it.
func WorstMultiLimits() []core.Limit {
	ls := make([]core.Limit, 8)
	for i := range ls {
		ls[i] = core.Per(1<<30, time.Duration(i+1)*75*time.Second)
	}
	return ls
}

// MaxBuckets is core's bound on Policy.Buckets.
const MaxBuckets = 600

// WorstCase is one decision pattern at the largest configuration
// validation accepts, for the stores' BenchmarkWorstCase.
type WorstCase struct {
	Name   string
	Policy core.Policy
	// Setup, when set, fills the key's state through take (a decision
	// at t0 plus at, of cost).
	Setup func(take func(at time.Duration, cost int64) core.Decision)
	// Step is step i's instant (after t0) and cost, and whether it must
	// be allowed.
	Step func(i int) (at time.Duration, cost int64, allowed bool)
}

// WorstCases are the patterns, next to a cheap GCRA baseline: a full
// 100,000-entry sliding log (denied, allowed, and counted at a huge
// cost), the largest ring the Redis store reads whole, a sliding counter
// of the most buckets (denied and allowed), and 8 limits sharing them.
func WorstCases() []WorstCase {
	const logC = 100_000
	fillLog := func(take func(time.Duration, int64) core.Decision) {
		// 1,000 chunks of 100 entries, 3.6 s apart: a full hour's log
		for j := 0; j < logC/100; j++ {
			take(time.Duration(j)*3600*time.Millisecond, 100)
		}
	}
	return []WorstCase{
		{"gcra_baseline", core.Policy{Name: "w-gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(100)}}, nil,
			func(i int) (time.Duration, int64, bool) { return time.Duration(i) * 600 * time.Millisecond, 1, true }},
		// a full 100,000-entry log hammered by its owner: denied every time
		{"sliding_log_100k_full_denied", core.Policy{Name: "w-log-d", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(logC)}}, fillLog,
			func(i int) (time.Duration, int64, bool) { return time.Hour - time.Second, 1, false }},
		// the same log kept full: each request admitted as an old entry leaves
		{"sliding_log_100k_full_allowed", core.Policy{Name: "w-log-a", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(logC)}}, fillLog,
			func(i int) (time.Duration, int64, bool) {
				return time.Hour + time.Duration(i/100)*3600*time.Millisecond + time.Duration(i%100)*time.Microsecond, 1, true
			}},
		// the largest ring the Redis store reads and writes whole (256
		// slots, 2 KB), kept full
		{"sliding_log_256_full_allowed", core.Policy{Name: "w-log-256", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerHour(256)}},
			func(take func(time.Duration, int64) core.Decision) {
				for j := 0; j < 256; j++ {
					take(time.Duration(j)*14062500*time.Microsecond, 1)
				}
			},
			func(i int) (time.Duration, int64, bool) {
				return time.Hour + time.Duration(i)*14062500*time.Microsecond, 1, true
			}},
		// a counted huge cost: writes a full window of C stamps every time
		{"sliding_log_100k_counted_huge_cost", core.Policy{Name: "w-log-c", Algorithm: core.SlidingWindowLog, CountDenied: true, Limits: []core.Limit{core.PerHour(logC)}}, nil,
			func(i int) (time.Duration, int64, bool) {
				return time.Duration(i) * time.Millisecond, math.MaxInt64, false
			}},
		// MaxBuckets one-second buckets, all full; a cost of the whole
		// capacity is denied with the latest RetryAfter (every bucket must
		// leave)
		{"sliding_counter_max_buckets_denied", core.Policy{Name: "w-sc", Algorithm: core.SlidingWindowCounter, Buckets: MaxBuckets,
			Limits: []core.Limit{core.Per(MaxBuckets*100, MaxBuckets*time.Second)}},
			func(take func(time.Duration, int64) core.Decision) {
				for j := 0; j < MaxBuckets; j++ {
					take(time.Duration(j)*time.Second, 100)
				}
			},
			func(i int) (time.Duration, int64, bool) {
				return MaxBuckets*time.Second - time.Second, MaxBuckets * 100, false
			}},
		// the same counter, allowed: every decision reads and writes the
		// whole window
		{"sliding_counter_max_buckets_allowed", core.Policy{Name: "w-sca", Algorithm: core.SlidingWindowCounter, Buckets: MaxBuckets,
			Limits: []core.Limit{core.Per(1<<30, MaxBuckets*time.Second)}},
			func(take func(time.Duration, int64) core.Decision) {
				for j := 0; j < MaxBuckets; j++ {
					take(time.Duration(j)*time.Second, 100)
				}
			},
			func(i int) (time.Duration, int64, bool) {
				return MaxBuckets*time.Second + time.Duration(i)*time.Millisecond, 1, true
			}},
		// the most limits (8), each with the buckets the bound on their
		// sum leaves (75 × 8 = MaxBuckets), full, allowed: every decision
		// reads and writes every bucket of every limit (8 × 600 buckets,
		// 1,397 µs of Redis CPU, is refused since issue 22)
		{"sliding_counter_8_limits_max_buckets_allowed", core.Policy{Name: "w-sc8", Algorithm: core.SlidingWindowCounter, Buckets: MaxBuckets / 8,
			Limits: WorstMultiLimits()},
			func(take func(time.Duration, int64) core.Decision) {
				for j := 0; j < MaxBuckets; j++ {
					take(time.Duration(j)*time.Second, 100)
				}
			},
			func(i int) (time.Duration, int64, bool) {
				return MaxBuckets*time.Second + time.Duration(i)*time.Millisecond, 1, true
			}},
	}
}
