package core

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vstep is one verb at base+at: 'A' a decision (Decide), 'P' a peek, 'C' a
// charge, 'R' a refund, 'W' a reservation (maxWait 10 s); then what it
// returns.
type vstep struct {
	verb      byte
	at, cost  int64
	allowed   bool
	remaining int64
	retry     time.Duration
	reset     time.Duration // -1: not checked
}

func applyVerb(c *Compiled, d *Decision, st []int64, verb byte, now, cost int64) {
	switch verb {
	case 'A':
		c.DecideTo(d, st, now, cost)
	case 'P':
		c.PeekTo(d, st, make([]int64, c.StateWords()), now, cost)
	case 'C':
		c.ChargeTo(d, st, now, cost)
	case 'R':
		c.RefundTo(d, st, now, cost)
	case 'W':
		c.ReserveTo(d, st, now, cost, 10_000_000)
	}
}

func runVerbSteps(t *testing.T, p Policy, steps []vstep) {
	t.Helper()
	c, err := p.Compile()
	require.NoError(t, err)
	st := make([]int64, c.StateWords())
	for i, s := range steps {
		var d Decision
		before := append([]int64(nil), st...)
		applyVerb(c, &d, st, s.verb, base+s.at, s.cost)
		if s.verb == 'P' {
			assert.Equal(t, before, st, "step %d: a peek changed the state", i)
		}
		got := fmt.Sprintf("%c allowed=%v rem=%d retry=%v", s.verb, d.Allowed, d.Remaining, d.RetryAfter)
		want := fmt.Sprintf("%c allowed=%v rem=%d retry=%v", s.verb, s.allowed, s.remaining, s.retry)
		assert.Equal(t, want, got, "step %d", i)
		if s.reset >= 0 {
			assert.Equal(t, s.reset, d.ResetAfter, "step %d reset-after", i)
		}
	}
}

const huge = math.MaxInt64

func TestVerbStepsGCRA(t *testing.T) {
	// 4 per second: T = 250 ms, a full quota's refill 1 s
	runVerbSteps(t, Policy{Name: "v", Algorithm: GCRA, Limits: []Limit{PerSecond(4)}}, []vstep{
		{'P', 0, 4, true, 0, 0, time.Second},                                   // a peek of the whole quota: allowed...
		{'P', 0, 5, false, 0, Never, 0},                                        // ...one more never
		{'C', 0, 6, false, 0, 750 * time.Millisecond, 1500 * time.Millisecond}, // owes 2: 3 × T before one is admitted
		{'A', 0, 1, false, 0, 750 * time.Millisecond, -1},
		{'P', 749 * ms, 1, false, 0, time.Millisecond, -1},
		{'A', 750 * ms, 1, true, 0, 0, time.Second},
		{'R', 750 * ms, 2, true, 2, 0, 500 * time.Millisecond},
		{'R', 750 * ms, huge, true, 4, 0, 0},                                      // never above a fresh key's quota
		{'C', 750 * ms, huge, false, 0, 1250 * time.Millisecond, 2 * time.Second}, // debt capped at one quota
		{'A', 1999 * ms, 1, false, 0, time.Millisecond, -1},
		{'A', 2000 * ms, 1, true, 0, 0, time.Second},
		// a reservation within one full refill: admitted for later
		{'W', 2000 * ms, 4, true, 0, time.Second, 2 * time.Second},
		{'W', 2000 * ms, 1, false, 0, 1250 * time.Millisecond, -1}, // beyond it: denied, nothing reserved
		// a clock stepped back an hour: the debt still ends within the bound
		{'C', -3600_000 * ms, huge, false, 0, 1250 * time.Millisecond, 2 * time.Second},
	})
}

func TestVerbStepsTokenBucket(t *testing.T) {
	// the same figures as GCRA: a bucket of 4, one token every 250 ms
	runVerbSteps(t, Policy{Name: "v", Algorithm: TokenBucket, Limits: []Limit{PerSecond(4)}}, []vstep{
		{'P', 0, 4, true, 0, 0, time.Second},
		{'P', 0, 5, false, 0, Never, 0},
		{'C', 0, 6, false, 0, 750 * time.Millisecond, 1500 * time.Millisecond},
		{'A', 0, 1, false, 0, 750 * time.Millisecond, -1},
		{'P', 749 * ms, 1, false, 0, time.Millisecond, -1},
		{'A', 750 * ms, 1, true, 0, 0, time.Second},
		{'R', 750 * ms, 2, true, 2, 0, 500 * time.Millisecond},
		{'R', 750 * ms, huge, true, 4, 0, 0},
		{'C', 750 * ms, huge, false, 0, 1250 * time.Millisecond, 2 * time.Second},
		{'A', 1999 * ms, 1, false, 0, time.Millisecond, -1},
		{'A', 2000 * ms, 1, true, 0, 0, time.Second},
		// a reservation within one full refill: admitted for later
		{'W', 2000 * ms, 4, true, 0, time.Second, 2 * time.Second},
		{'W', 2000 * ms, 1, false, 0, 1250 * time.Millisecond, -1}, // beyond it: denied, nothing reserved
		{'C', -3600_000 * ms, huge, false, 0, 1250 * time.Millisecond, 2 * time.Second},
	})
}

func TestVerbStepsFixedWindow(t *testing.T) {
	runVerbSteps(t, Policy{Name: "v", Algorithm: FixedWindow, Limits: []Limit{PerSecond(4)}}, []vstep{
		{'P', 0, 4, true, 0, 0, time.Second},
		{'P', 0, 5, false, 0, Never, time.Second},
		{'C', 0, 6, false, 0, time.Second, time.Second}, // the debt ends with the window
		{'A', 0, 1, false, 0, time.Second, -1},
		{'R', 500 * ms, 1, true, 1, 0, 500 * time.Millisecond},
		{'A', 500 * ms, 1, true, 0, 0, 500 * time.Millisecond},
		{'R', 500 * ms, huge, true, 4, 0, 500 * time.Millisecond},
		{'A', 999 * ms, 4, true, 0, 0, time.Millisecond},
		{'A', 1000 * ms, 3, true, 1, 0, time.Second},
		{'R', 1000 * ms, huge, true, 4, 0, time.Second}, // the ended window's 4 stay spent
		{'C', 1000 * ms, huge, false, 0, time.Second, time.Second},
		{'A', 2000 * ms, 1, true, 3, 0, time.Second},
		// a caller that read the clock before the window rolled over acts
		// on the window in force, the next one
		{'C', 1999 * ms, 2, true, 1, 0, 1001 * time.Millisecond},
		{'R', 1999 * ms, 1, true, 2, 0, 1001 * time.Millisecond},
		{'C', -3600_000 * ms, huge, false, 0, time.Second, time.Second},
	})
}

func TestVerbStepsSlidingLog(t *testing.T) {
	runVerbSteps(t, Policy{Name: "v", Algorithm: SlidingWindowLog, Limits: []Limit{PerSecond(4)}}, []vstep{
		{'P', 0, 4, true, 0, 0, time.Second},
		{'P', 0, 5, false, 0, Never, -1},
		{'C', 0, 6, false, 0, time.Second, time.Second},
		{'A', 0, 1, false, 0, time.Second, -1},
		{'R', 500 * ms, 1, true, 1, 0, 500 * time.Millisecond},
		{'A', 500 * ms, 1, true, 0, 0, time.Second},
		{'R', 500 * ms, huge, true, 4, 0, 0},
		{'A', 999 * ms, 4, true, 0, 0, time.Second},
		// 2 past the limit overwrite the 2 oldest units: they leave with
		// the other units of 999 ms
		{'C', 1000 * ms, 2, false, 0, 999 * time.Millisecond, time.Second},
		{'A', 1998 * ms, 1, false, 0, time.Millisecond, -1},
		{'A', 1999 * ms, 2, true, 0, 0, time.Second},
		{'R', 3000 * ms, huge, true, 4, 0, 0}, // units that left the window are not returned
		{'C', -3600_000 * ms, huge, false, 0, time.Second, time.Second},
	})
}

func TestVerbStepsSlidingCounter(t *testing.T) {
	runVerbSteps(t, Policy{Name: "v", Algorithm: SlidingWindowCounter, Limits: []Limit{PerSecond(4)}}, []vstep{
		{'P', 0, 4, true, 0, 0, 2 * time.Second},
		{'P', 0, 5, false, 0, Never, 0},
		{'C', 0, 6, false, 0, 1250 * time.Millisecond, 2 * time.Second},
		{'A', 0, 1, false, 0, 1250 * time.Millisecond, -1},
		{'R', 500 * ms, 1, true, 1, 0, 1500 * time.Millisecond},
		{'A', 500 * ms, 1, true, 0, 0, 1500 * time.Millisecond},
		{'R', 500 * ms, huge, true, 4, 0, 0},
		{'A', 999 * ms, 4, true, 0, 0, 1001 * time.Millisecond},
		{'C', 1000 * ms, 2, false, 0, 750 * time.Millisecond, 2 * time.Second},
		// the refund takes from the current bucket only: the previous
		// bucket is partly out of the window
		{'R', 1000 * ms, huge, false, 0, 250 * time.Millisecond, time.Second},
		{'C', -3600_000 * ms, huge, false, 0, 1250 * time.Millisecond, 2 * time.Second},
	})
}

// TestVerbBounds drives every algorithm, with one limit and two, through
// random verbs, clock steps and huge costs, and checks what the verbs
// promise: a peek changes nothing and answers as Decide would; a refund
// never leaves more than a fresh key's quota; a charge never makes a
// request of cost 1 wait longer than the algorithm's debt bound.
func TestVerbBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 24))
	for _, alg := range []Algorithm{GCRA, TokenBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter} {
		for _, limits := range [][]Limit{{PerSecond(5)}, {PerSecond(5), Per(12, 10*time.Second)}} {
			p := Policy{Name: "b", Algorithm: alg, Limits: limits, Buckets: 4}
			if alg != SlidingWindowCounter {
				p.Buckets = 0
			}
			c, err := p.Compile()
			require.NoError(t, err)
			st := make([]int64, c.StateWords())
			now, latest := base, base
			for i := 0; i < 3000; i++ {
				switch rng.IntN(10) {
				case 0:
					now -= rng.Int64N(20_000_000) // the clock goes back up to 20 s
				default:
					now += rng.Int64N(400_000)
				}
				// the debt bound holds on a clock that did not go back
				monotonic := now >= latest
				latest = max(latest, now)
				cost := rng.Int64N(8)
				if rng.IntN(20) == 0 {
					cost = huge - rng.Int64N(3)
				}
				var d Decision
				switch v := "APCRW"[rng.IntN(5)]; v {
				case 'P':
					before := append([]int64(nil), st...)
					applyVerb(c, &d, st, v, now, cost)
					var want Decision
					c.DecideTo(&want, append([]int64(nil), st...), now, cost)
					want.ElasticRoom = false
					require.Equal(t, want, d, "%s step %d: peek", alg, i)
					require.Equal(t, before, st, "%s step %d: peek wrote", alg, i)
				case 'R':
					applyVerb(c, &d, st, v, now, cost)
					require.LessOrEqual(t, d.Remaining, d.Limit.Requests, "%s step %d: refund above a fresh quota", alg, i)
				case 'C':
					applyVerb(c, &d, st, v, now, cost)
					if monotonic {
						require.LessOrEqual(t, d.RetryAfter, debtBound(alg, limits), "%s step %d: charge debt", alg, i)
					}
					require.GreaterOrEqual(t, d.RetryAfter, time.Duration(0))
				default:
					applyVerb(c, &d, st, v, now, cost)
				}
			}
		}
	}
}

// debtBound is the longest wait for a request of cost 1 after a charge:
// one full quota's refill plus one unit (GCRA, token bucket), a window
// (fixed window, log), a window and a bucket (counter); the longest over
// the limits.
func debtBound(alg Algorithm, limits []Limit) time.Duration {
	var b time.Duration
	for _, l := range limits {
		t := time.Duration(EmissionInterval(l)) * time.Microsecond
		switch alg {
		case GCRA, TokenBucket:
			b = max(b, time.Duration(l.capacity())*t+t)
		case SlidingWindowCounter:
			b = max(b, l.Window+l.Window/4)
		default:
			b = max(b, l.Window)
		}
	}
	return b
}
