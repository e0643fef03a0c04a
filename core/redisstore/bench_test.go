package redisstore

import (
	"time"

	"github.com/limitkit/limitkit/core"
)

// benchPolicies is one single-limit policy per algorithm and a two-limit
// policy, sized like real per-user limits.
func benchPolicies() []core.Policy {
	return []core.Policy{
		{Name: "gcra", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "token_bucket", Algorithm: core.TokenBucket, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "fixed_window", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "sliding_log", Algorithm: core.SlidingWindowLog, Limits: []core.Limit{core.PerMinute(100)}},
		{Name: "sliding_counter", Algorithm: core.SlidingWindowCounter, Buckets: 60, Limits: []core.Limit{core.PerHour(1000)}},
		{Name: "gcra_two_limits", Algorithm: core.GCRA, Limits: []core.Limit{core.Per(900, 15*time.Minute), core.PerMinute(200)}},
	}
}
