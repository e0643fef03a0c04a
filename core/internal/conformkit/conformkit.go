// Package conformkit holds what the store conformance suite
// (core/storetest) and the in-module stores' own tests share: the
// suite's fixed epoch and policies, core's model of the quota verbs on a
// plain state, and the costliest multi-limit policy. Test support only.
package conformkit

import (
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
