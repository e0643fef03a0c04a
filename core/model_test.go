package core

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The reference models below are written independently of algo.go,
// algo_rate.go and algo_window.go, as plainly as possible: a list of
// admitted timestamps, a map of windows, a continuous token bucket in
// integer µs of credit.

type event struct{ at, cost int64 }

// model answers whether a request is admitted, and records it if so.
type model interface {
	admit(now, cost int64) bool
}

type logModel struct {
	w, capa int64
	units   []int64
}

func (m *logModel) admit(now, cost int64) bool {
	var in int64
	for _, ts := range m.units {
		if ts > now-m.w {
			in++
		}
	}
	if in+cost > m.capa {
		return false
	}
	for i := int64(0); i < cost; i++ {
		m.units = append(m.units, now)
	}
	return true
}

type windowModel struct {
	w, capa int64
	counts  map[int64]int64
}

func (m *windowModel) admit(now, cost int64) bool {
	i := now / m.w
	if m.counts[i]+cost > m.capa {
		return false
	}
	m.counts[i] += cost
	return true
}

// bucketModel: credit in µs, refilled 1 µs per µs up to capa×T; a unit of
// cost spends T. GCRA and the token bucket must both agree with it.
type bucketModel struct {
	t, capa, credit, last int64
	started               bool
}

func (m *bucketModel) admit(now, cost int64) bool {
	if !m.started {
		m.credit, m.last, m.started = m.capa*m.t, now, true
	}
	m.credit = min(m.capa*m.t, m.credit+(now-m.last))
	m.last = now
	if cost*m.t > m.credit {
		return false
	}
	m.credit -= cost * m.t
	return true
}

// counterModel keeps every bucket's count forever.
type counterModel struct {
	n, bl, capa int64
	counts      map[int64]int64
}

func (m *counterModel) admit(now, cost int64) bool {
	i, e := now/m.bl, now%m.bl
	var sum int64
	for j := i - m.n + 1; j <= i; j++ {
		sum += m.counts[j]
	}
	est := float64(sum) + float64(float64(m.counts[i-m.n])*float64(float64(m.bl-e)/float64(m.bl)))
	if est > float64(m.capa-cost) {
		return false
	}
	m.counts[i] += cost
	return true
}

func newModel(p Policy) model {
	l := p.Limits[0]
	w := l.Window.Microseconds()
	switch p.Algorithm {
	case SlidingWindowLog:
		return &logModel{w: w, capa: l.Requests}
	case FixedWindow:
		return &windowModel{w: w, capa: l.Requests, counts: map[int64]int64{}}
	case SlidingWindowCounter:
		return &counterModel{n: int64(p.buckets()), bl: w / int64(p.buckets()), capa: l.Requests, counts: map[int64]int64{}}
	}
	return &bucketModel{t: modelInterval(l), capa: l.capacity()}
}

// modelInterval is the time one unit takes to refill, as documented (the
// window over the requests, in whole µs, rounded up so the rate is never
// exceeded), computed apart from EmissionInterval: the fewest whole µs t
// with t × Requests ≥ Window.
func modelInterval(l Limit) int64 {
	w := l.Window.Microseconds()
	t := w / l.Requests
	for t*l.Requests < w {
		t++
	}
	return t
}

// TestEmissionIntervalRoundsUp pins EmissionInterval against the
// documented rounding on windows that do and do not divide evenly.
func TestEmissionIntervalRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		l    Limit
		want int64
	}{
		{Per(5, time.Second), 200_000},
		{Per(3, time.Second), 333_334},
		{Per(7, 3*time.Second), 428_572},
		{Per(1_000_000, time.Second), 1},
		{Per(3_000_000, time.Second), 1},
	} {
		require.Equal(t, tc.want, EmissionInterval(tc.l), "%v", tc.l)
		require.Equal(t, tc.want, modelInterval(tc.l), "%v", tc.l)
	}
}

var modelPolicies = []Policy{
	{Name: "gcra", Algorithm: GCRA, Limits: []Limit{Per(7, 3*time.Second).WithBurst(4)}},
	{Name: "tb", Algorithm: TokenBucket, Limits: []Limit{Per(5, time.Second).WithBurst(9)}},
	{Name: "fw", Algorithm: FixedWindow, Limits: []Limit{Per(5, time.Second)}},
	{Name: "log", Algorithm: SlidingWindowLog, Limits: []Limit{Per(5, time.Second)}},
	{Name: "sc1", Algorithm: SlidingWindowCounter, Limits: []Limit{Per(9, time.Second)}},
	{Name: "sc6", Algorithm: SlidingWindowCounter, Buckets: 6, Limits: []Limit{Per(9, 3*time.Second)}},
}

// genEvents produces monotone random traffic at several time scales.
func genEvents(rng *rand.Rand, n int) []event {
	now := base + rng.Int64N(1_000_000)
	evs := make([]event, n)
	for i := range evs {
		switch rng.IntN(5) {
		case 0:
		case 1:
			now += rng.Int64N(2000)
		case 2, 3:
			now += rng.Int64N(400_000)
		default:
			now += rng.Int64N(3_000_000)
		}
		evs[i] = event{now, rng.Int64N(4)}
	}
	return evs
}

// TestAgainstReferenceModels: on random traffic every algorithm admits
// exactly what its reference model admits; every RetryAfter is exact (the
// same request is admitted at now+RetryAfter and not a microsecond
// earlier); and Remaining is the largest cost admitted right now.
func TestAgainstReferenceModels(t *testing.T) {
	for _, p := range modelPolicies {
		t.Run(p.Name, func(t *testing.T) {
			c, err := p.Compile()
			require.NoError(t, err)
			for seed := uint64(0); seed < 30; seed++ {
				rng := rand.New(rand.NewPCG(seed, 99))
				m := newModel(p)
				st := make([]int64, c.StateWords())
				for i, e := range genEvents(rng, 200) {
					checkExact(t, c, st, e.at, e.cost)
					d := c.Decide(st, e.at, e.cost)
					require.Equal(t, m.admit(e.at, e.cost), d.Allowed, "seed %d step %d %+v", seed, i, e)
				}
			}
		})
	}
}

// checkExact probes copies of st: RetryAfter and Remaining are exact.
func checkExact(t *testing.T, c *Compiled, st []int64, now, cost int64) {
	t.Helper()
	// every decision first normalizes what a clock gone back left (a peek
	// does too); RetryAfter is exact from that state on
	st = append([]int64(nil), st...)
	c.Decide(st, now, 0)
	probe := func(at, cost int64) Decision {
		cp := append([]int64(nil), st...)
		return c.Decide(cp, at, cost)
	}
	d := probe(now, cost)
	if d.Allowed {
		require.Zero(t, d.RetryAfter)
		// Remaining is exact: that much more fits now, one more does not.
		r := probe(now, 0).Remaining
		require.True(t, probe(now, r).Allowed, "remaining %d must fit", r)
		require.False(t, probe(now, r+1).Allowed, "remaining %d: one more must not fit", r)
		return
	}
	if d.RetryAfter == Never {
		require.Greater(t, cost, c.limits[0].capa)
		return
	}
	ra := d.RetryAfter.Microseconds()
	require.Positive(t, ra)
	require.True(t, probe(now+ra, cost).Allowed, "admitted after RetryAfter %v", d.RetryAfter)
	require.False(t, probe(now+ra-1, cost).Allowed, "not admitted 1µs before RetryAfter %v", d.RetryAfter)
}

// TestWindowInvariants: over random traffic, no window of the limit's
// length holds more admitted cost than the limit (sliding log: any window;
// fixed window: any aligned window), and GCRA and the token bucket never
// admit more than capacity + elapsed/T over any interval.
func TestWindowInvariants(t *testing.T) {
	for _, p := range modelPolicies {
		t.Run(p.Name, func(t *testing.T) {
			c, _ := p.Compile()
			for seed := uint64(0); seed < 20; seed++ {
				rng := rand.New(rand.NewPCG(seed, 5))
				st := make([]int64, c.StateWords())
				var adm []event
				for _, e := range genEvents(rng, 300) {
					if c.Decide(st, e.at, e.cost).Allowed && e.cost > 0 {
						adm = append(adm, e)
					}
				}
				checkInvariant(t, p, adm)
			}
		})
	}
}

func checkInvariant(t *testing.T, p Policy, adm []event) {
	t.Helper()
	l := p.Limits[0]
	w := l.Window.Microseconds()
	switch p.Algorithm {
	case SlidingWindowLog:
		for i := range adm {
			var sum int64
			for j := i; j >= 0 && adm[j].at > adm[i].at-w; j-- {
				sum += adm[j].cost
			}
			if sum > l.Requests {
				t.Fatalf("window ending at %d holds %d > %d", adm[i].at, sum, l.Requests)
			}
		}
	case FixedWindow:
		per := map[int64]int64{}
		for _, e := range adm {
			per[e.at/w] += e.cost
			require.LessOrEqual(t, per[e.at/w], l.Requests)
		}
	case GCRA, TokenBucket:
		tt := modelInterval(l)
		for i := range adm {
			var sum int64
			for j := i; j < len(adm); j++ {
				sum += adm[j].cost
				if bound := l.capacity() + (adm[j].at-adm[i].at)/tt; sum > bound {
					t.Fatalf("admitted %d in [%d, %d], more than %d", sum, adm[i].at, adm[j].at, bound)
				}
			}
		}
	}
}

// FuzzDecide decodes (time step, cost) pairs and checks, for every
// algorithm, that nothing panics, the invariants hold and RetryAfter is
// exact, including with clock jumps backwards; until the first jump back,
// each admits exactly what its reference model admits. The input is decoded
// once; every policy replays the whole sequence, and the test asserts that
// each one ran every step.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0, 1, 200, 2, 255, 3})
	f.Add([]byte{10, 3, 10, 3, 128, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		steps := decodeFuzzSteps(data)
		for _, p := range modelPolicies {
			c, err := p.Compile()
			require.NoError(t, err)
			st := make([]int64, c.StateWords())
			now := base
			var adm []event
			monotone := true
			m := newModel(p)
			ran := 0
			for i, s := range steps {
				if s.at < 0 {
					monotone = false
				}
				now += s.at
				checkExact(t, c, st, now, s.cost)
				d := c.Decide(st, now, s.cost)
				if monotone {
					// the reference models assume time never goes back
					require.Equal(t, m.admit(now, s.cost), d.Allowed, "policy %s step %d", p.Name, i)
				}
				if d.Allowed && s.cost > 0 {
					adm = append(adm, event{now, s.cost})
				}
				ran++
			}
			require.Equal(t, min(len(data)/3, maxFuzzSteps), ran, "policy %s must run every decoded step", p.Name)
			if monotone {
				checkInvariant(t, p, adm)
			}
		}
	})
}

// maxFuzzSteps bounds the steps decoded from one input: the invariant check
// and the sliding-log model are quadratic, and the fuzzer's long inputs would
// otherwise stall it for minutes on a single input.
const maxFuzzSteps = 1000

// decodeFuzzSteps turns each 3 bytes of data into a step (at most
// maxFuzzSteps): event.at holds the time delta (negative: the clock jumps
// back), event.cost the cost 0..4.
func decodeFuzzSteps(data []byte) []event {
	steps := make([]event, 0, min(len(data)/3, maxFuzzSteps))
	for ; len(data) >= 3 && len(steps) < maxFuzzSteps; data = data[3:] {
		dt := int64(int8(data[0])) * int64(binary.LittleEndian.Uint16([]byte{data[1], 0})) * 97
		steps = append(steps, event{dt, int64(data[2] % 5)})
	}
	return steps
}
