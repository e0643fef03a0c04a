package storetest

import (
	"time"

	"github.com/limitkit/limitkit/core"
)

// WorstMultiLimits is the limits of the costliest multi-limit sliding
// counter validation accepts, with 75 buckets each (8 × 75 = 600, the
// bound on the buckets of all limits): core.MaxLimits limits that never
// deny, over windows of 75 s to 600 s, which 75 buckets divide. The
// stores' BenchmarkWorstCase runs it.
func WorstMultiLimits() []core.Limit {
	ls := make([]core.Limit, core.MaxLimits)
	for i := range ls {
		ls[i] = core.Per(1<<30, time.Duration(i+1)*75*time.Second)
	}
	return ls
}
