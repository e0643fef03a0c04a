package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// limitsOf returns n limits of Requests r over windows of i × w, i = 1..n.
func limitsOf(n int, r int64, w time.Duration) []Limit {
	ls := make([]Limit, n)
	for i := range ls {
		ls[i] = Per(r, time.Duration(i+1)*w)
	}
	return ls
}

// TestValidateBoundsDecisionWork (issue 22): the state one decision reads
// is bounded whatever the number of limits: 8 limits × 600 buckets (1,397
// µs of Redis CPU) is refused with what to change, 8 × 75 is accepted; so
// are sliding logs whose slots, summed over the limits with soft and
// elastic overage, pass 100,000; and a ninth limit.
func TestValidateBoundsDecisionWork(t *testing.T) {
	sig := LoadBelow{InFlight: &InFlight{}, Max: 1}
	for _, tc := range []struct {
		p    Policy
		want string // "" = valid
	}{
		{Policy{Algorithm: SlidingWindowCounter, Buckets: 600, Limits: limitsOf(8, 600, 10*time.Minute)}, "8 limits × 600 buckets = 4800 buckets, and every decision reads them all; at most 600 in all: use at most 75 buckets or fewer limits"},
		{Policy{Algorithm: SlidingWindowCounter, Buckets: 76, Limits: limitsOf(8, 600, 76*time.Second)}, "= 608 buckets"},
		{Policy{Algorithm: SlidingWindowCounter, Buckets: 75, Limits: limitsOf(8, 600, 75*time.Second)}, ""},
		{Policy{Algorithm: SlidingWindowCounter, Buckets: 600, Limits: limitsOf(1, 600, 10*time.Minute)}, ""},
		{Policy{Algorithm: SlidingWindowCounter, Buckets: 300, Limits: limitsOf(2, 600, 10*time.Minute)}, ""},
		{Policy{Algorithm: SlidingWindowCounter, Buckets: 301, Limits: limitsOf(2, 600, 301*time.Second)}, "2 limits × 301 buckets = 602"},
		{Policy{Algorithm: SlidingWindowLog, Limits: limitsOf(8, 12_500, time.Hour)}, ""},
		{Policy{Algorithm: SlidingWindowLog, Limits: limitsOf(8, 12_501, time.Hour)}, "100008 in all, at most 100000"},
		{Policy{Algorithm: SlidingWindowLog, Limits: limitsOf(1, 100_000, time.Hour)}, ""},
		{Policy{Algorithm: SlidingWindowLog, SoftPercent: 10, Limits: limitsOf(1, 100_000, time.Hour)}, "110000 in all"},
		{Policy{Algorithm: SlidingWindowLog, Elastic: &Elastic{CeilingPercent: 200, Signal: sig}, Limits: limitsOf(2, 25_000, time.Hour)}, ""},
		{Policy{Algorithm: SlidingWindowLog, Elastic: &Elastic{CeilingPercent: 200, Signal: sig}, Limits: limitsOf(2, 25_001, time.Hour)}, "100004 in all"},
		{Policy{Algorithm: GCRA, Limits: limitsOf(maxLimits, 10, time.Minute)}, ""},
		{Policy{Algorithm: GCRA, Limits: limitsOf(maxLimits+1, 10, time.Minute)}, "9 limits, at most 8 (a decision checks every limit); drop the limits"},
	} {
		tc.p.Name = "p"
		err := tc.p.Validate()
		if tc.want == "" {
			assert.NoError(t, err, "%v × %d", tc.p.Limits, tc.p.Buckets)
			continue
		}
		require.Error(t, err, "%v × %d", tc.p.Limits, tc.p.Buckets)
		assert.Contains(t, err.Error(), tc.want)
	}
}
