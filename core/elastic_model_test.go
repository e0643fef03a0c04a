package core

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Elastic reference models: each admits nominally within capa, else, when
// the signal has room, within ceil; both kinds of admission are recorded
// alike (the ceiling counts every admission).

type elasticModel interface {
	// admit reports whether the request is admitted and whether elastically.
	admit(now, cost int64, room bool) (ok, elastic bool)
	// fits reports whether the ceiling would admit, recording nothing.
	fits(now, cost int64) bool
}

type elLog struct {
	w, capa, ceil int64
	units         []int64
}

func (m *elLog) in(now int64) (n int64) {
	for _, ts := range m.units {
		if ts > now-m.w {
			n++
		}
	}
	return n
}

func (m *elLog) fits(now, cost int64) bool { return m.in(now)+cost <= m.ceil }

func (m *elLog) admit(now, cost int64, room bool) (bool, bool) {
	in := m.in(now)
	el := false
	switch {
	case in+cost <= m.capa:
	case room && in+cost <= m.ceil:
		el = true
	default:
		return false, false
	}
	for i := int64(0); i < cost; i++ {
		m.units = append(m.units, now)
	}
	return true, el
}

type elWindow struct {
	w, capa, ceil int64
	counts        map[int64]int64
}

func (m *elWindow) fits(now, cost int64) bool { return m.counts[now/m.w]+cost <= m.ceil }

func (m *elWindow) admit(now, cost int64, room bool) (bool, bool) {
	i := now / m.w
	el := false
	switch {
	case m.counts[i]+cost <= m.capa:
	case room && m.counts[i]+cost <= m.ceil:
		el = true
	default:
		return false, false
	}
	m.counts[i] += cost
	return true, el
}

// elBucket: credit in µs, refilled 1 µs per µs up to capa×T; a unit spends
// T; the credit may go down to −(ceil − capa)×T by elastic admissions.
type elBucket struct {
	t, capa, ceil, credit, last int64
	started                     bool
}

func (m *elBucket) refill(now int64) {
	if !m.started {
		m.credit, m.last, m.started = m.capa*m.t, now, true
	}
	m.credit = min(m.capa*m.t, m.credit+(now-m.last))
	m.last = now
}

func (m *elBucket) fits(now, cost int64) bool {
	c := *m
	c.refill(now)
	return cost*c.t <= c.credit+(c.ceil-c.capa)*c.t
}

func (m *elBucket) admit(now, cost int64, room bool) (bool, bool) {
	m.refill(now)
	el := false
	switch {
	case cost*m.t <= m.credit:
	case room && cost*m.t <= m.credit+(m.ceil-m.capa)*m.t:
		el = true
	default:
		return false, false
	}
	m.credit -= cost * m.t
	return true, el
}

type elCounter struct {
	n, bl, capa, ceil int64
	counts            map[int64]int64
}

func (m *elCounter) est(now int64) float64 {
	i, e := now/m.bl, now%m.bl
	var sum int64
	for j := i - m.n + 1; j <= i; j++ {
		sum += m.counts[j]
	}
	return float64(sum) + float64(float64(m.counts[i-m.n])*float64(float64(m.bl-e)/float64(m.bl)))
}

func (m *elCounter) fits(now, cost int64) bool { return m.est(now) <= float64(m.ceil-cost) }

func (m *elCounter) admit(now, cost int64, room bool) (bool, bool) {
	est := m.est(now)
	el := false
	switch {
	case est <= float64(m.capa-cost):
	case room && est <= float64(m.ceil-cost):
		el = true
	default:
		return false, false
	}
	m.counts[now/m.bl] += cost
	return true, el
}

// modelCeiling is the documented ceiling (Elastic: "each limit's
// capacity rounded down: 10 × 150% = 15"), computed apart from
// production's arithmetic: the most units c with c ≤ capa × percent/100,
// found by counting up from capa.
func modelCeiling(capa int64, percent int) int64 {
	c := capa
	for (c+1)*100 <= capa*int64(percent) {
		c++
	}
	return c
}

func newElasticModel(p Policy) elasticModel {
	l := p.Limits[0]
	w := l.Window.Microseconds()
	capa := l.capacity()
	ceil := modelCeiling(capa, p.Elastic.CeilingPercent)
	switch p.Algorithm {
	case SlidingWindowLog:
		return &elLog{w: w, capa: capa, ceil: ceil}
	case FixedWindow:
		return &elWindow{w: w, capa: capa, ceil: ceil, counts: map[int64]int64{}}
	case SlidingWindowCounter:
		return &elCounter{n: int64(p.buckets()), bl: w / int64(p.buckets()), capa: capa, ceil: ceil, counts: map[int64]int64{}}
	}
	return &elBucket{t: modelInterval(l), capa: capa, ceil: ceil}
}

type fixedSignal bool

func (s fixedSignal) Acquire(context.Context, int64) (bool, error) { return bool(s), nil }

// elasticPolicies are modelPolicies with a ceiling (above 200% for GCRA,
// whose clock-step normalization must then use the ceiling's tolerance).
func elasticPolicies() []Policy {
	var ps []Policy
	ceilings := []int{300, 250, 150, 250, 150, 300}
	for i, p := range modelPolicies {
		p.Elastic = &Elastic{CeilingPercent: ceilings[i], Signal: fixedSignal(true)}
		ps = append(ps, p)
	}
	return ps
}

// TestElasticAgainstReferenceModels: on random traffic with a signal that
// flips at random, every algorithm admits exactly what its elastic model
// admits, marks exactly the admissions above the limit Elastic (with
// Remaining 0), hints ElasticRoom exactly when the ceiling would admit,
// and every nominal denial's RetryAfter is exact (the nominal limit
// admits the request then and not a microsecond earlier) even when the
// state holds elastic admissions.
func TestElasticAgainstReferenceModels(t *testing.T) {
	for _, p := range elasticPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			c, err := p.Compile()
			require.NoError(t, err)
			elastic := 0
			for seed := uint64(0); seed < 30; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				m := newElasticModel(p)
				st := make([]int64, c.StateWords())
				for i, e := range genEvents(rng, 200) {
					e.cost = rng.Int64N(5)
					room := rng.IntN(3) > 0
					fits := m.fits(e.at, e.cost)
					wantOK, wantEl := m.admit(e.at, e.cost, room)
					d := c.Decide(st, e.at, e.cost)
					if d.Allowed {
						require.True(t, wantOK && !wantEl, "seed %d step %d %+v: nominal admission the model refuses", seed, i, e)
						require.False(t, d.ElasticRoom)
						continue
					}
					require.Equal(t, fits, d.ElasticRoom, "seed %d step %d %+v: ElasticRoom", seed, i, e)
					probe := func(at, cost int64) Decision {
						cp := append([]int64(nil), st...)
						return c.Decide(cp, at, cost)
					}
					if ra := d.RetryAfter; ra != Never {
						require.True(t, probe(e.at+ra.Microseconds(), e.cost).Allowed, "seed %d step %d: admitted after RetryAfter %v", seed, i, ra)
						require.False(t, probe(e.at+ra.Microseconds()-1, e.cost).Allowed, "seed %d step %d: not before RetryAfter %v", seed, i, ra)
					}
					if !room || !d.ElasticRoom {
						require.False(t, wantOK, "seed %d step %d %+v", seed, i, e)
						continue
					}
					ed := c.decideElastic(st, e.at, e.cost)
					require.Equal(t, wantOK, ed.Allowed, "seed %d step %d %+v: elastic admission", seed, i, e)
					require.Equal(t, wantEl, ed.Elastic, "seed %d step %d %+v", seed, i, e)
					require.Zero(t, ed.Remaining)
					require.Zero(t, ed.RetryAfter)
					require.Equal(t, p.Limits[0], ed.Limit)
					elastic++
				}
			}
			require.Positive(t, elastic, "the traffic must reach the elastic path")
		})
	}
}

// TestElasticCeilingInvariants: with a signal that always has room, no
// window holds more than the ceiling, and GCRA and the token bucket never
// admit more than ceiling + elapsed/T over any interval.
func TestElasticCeilingInvariants(t *testing.T) {
	for _, p := range elasticPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			c, _ := p.Compile()
			ceil := modelCeiling(p.Limits[0].capacity(), p.Elastic.CeilingPercent)
			raised := p
			raised.Elastic = nil
			raised.Limits = []Limit{p.Limits[0]}
			raised.Limits[0].Requests = p.Limits[0].Requests * ceil / p.Limits[0].capacity()
			raised.Limits[0].Burst = ceil
			if p.Algorithm != GCRA && p.Algorithm != TokenBucket {
				raised.Limits[0].Requests, raised.Limits[0].Burst = ceil, 0
			}
			for seed := uint64(0); seed < 20; seed++ {
				rng := rand.New(rand.NewPCG(seed, 5))
				st := make([]int64, c.StateWords())
				var adm []event
				for _, e := range genEvents(rng, 300) {
					d := c.Decide(st, e.at, e.cost)
					if !d.Allowed && d.ElasticRoom {
						d = c.decideElastic(st, e.at, e.cost)
					}
					if d.Allowed && e.cost > 0 {
						adm = append(adm, e)
					}
				}
				if p.Algorithm == GCRA || p.Algorithm == TokenBucket {
					// the refill rate stays the nominal one
					tt := modelInterval(p.Limits[0])
					for i := range adm {
						var sum int64
						for j := i; j < len(adm); j++ {
							sum += adm[j].cost
							require.LessOrEqual(t, sum, ceil+(adm[j].at-adm[i].at)/tt)
						}
					}
					continue
				}
				checkInvariant(t, raised, adm)
			}
		})
	}
}

// TestElasticNoRoomIsHard: an elastic policy whose signal never has room
// decides exactly as the same policy without Elastic, every field
// (ElasticRoom aside, which the Limiter clears).
func TestElasticNoRoomIsHard(t *testing.T) {
	for _, p := range elasticPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			hard := p
			hard.Elastic = nil
			ce, _ := p.Compile()
			ch, _ := hard.Compile()
			for seed := uint64(0); seed < 20; seed++ {
				rng := rand.New(rand.NewPCG(seed, 11))
				se, sh := make([]int64, ce.StateWords()), make([]int64, ch.StateWords())
				for i, e := range genEvents(rng, 300) {
					de, dh := ce.Decide(se, e.at, e.cost), ch.Decide(sh, e.at, e.cost)
					de.ElasticRoom = false
					require.Equal(t, dh, de, "seed %d step %d %+v", seed, i, e)
				}
			}
		})
	}
}

// TestElasticMultiLimit: with two limits, an elastic admission needs room
// under both ceilings, is all-or-nothing, and reports the nominally
// exhausted limit as binding.
func TestElasticMultiLimit(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, TokenBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			p := Policy{Name: "m", Algorithm: alg, Limits: []Limit{Per(10, time.Hour), Per(4, time.Minute)},
				Elastic: &Elastic{CeilingPercent: 200, Signal: fixedSignal(true)}}
			c, err := p.Compile()
			require.NoError(t, err)
			st := make([]int64, c.StateWords())
			now := base - base%(time.Hour.Microseconds()) + 1
			for i := 0; i < 4; i++ {
				require.True(t, c.Decide(st, now, 1).Allowed)
			}
			d := c.Decide(st, now, 1)
			require.False(t, d.Allowed)
			require.True(t, d.ElasticRoom)
			for i := 0; i < 4; i++ {
				e := c.decideElastic(st, now, 1)
				require.True(t, e.Allowed, "elastic %d", i)
				require.True(t, e.Elastic)
				require.Equal(t, p.Limits[1], e.Limit, "the per-minute limit is the exhausted one")
				require.Zero(t, e.Remaining)
			}
			// 8 of the per-minute ceiling: no room; the hourly limit has 2 left
			d = c.Decide(st, now, 1)
			require.False(t, d.Allowed)
			require.False(t, d.ElasticRoom)
			require.False(t, c.decideElastic(st, now, 1).Allowed)
			// a minute later: 4 nominal per-minute, but the hourly has 2
			// nominal left, then the hourly ceiling 20 − 8 = 12 elastic
			now += time.Minute.Microseconds()
			if alg != FixedWindow && alg != SlidingWindowLog {
				return // buckets refill and the counter's estimate weighs the last minute: the exact windows suffice here
			}
			got := 0
			for i := 0; i < 10; i++ {
				d := c.Decide(st, now, 1)
				if !d.Allowed && d.ElasticRoom {
					d = c.decideElastic(st, now, 1)
				}
				if d.Allowed {
					got++
				}
			}
			require.Equal(t, 8, got, "the per-minute ceiling (8) binds")
		})
	}
}

func TestElasticValidation(t *testing.T) {
	sig := fixedSignal(true)
	ok := func() Policy {
		return Policy{Name: "p", Algorithm: FixedWindow, Limits: []Limit{PerMinute(10)}, Elastic: &Elastic{CeilingPercent: 200, Signal: sig}}
	}
	cases := []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"ceiling 100", func(p *Policy) { p.Elastic.CeilingPercent = 100 }, "elastic ceiling must be in (100%, 1000%], got 100%"},
		{"ceiling 0", func(p *Policy) { p.Elastic.CeilingPercent = 0 }, "got 0%"},
		{"ceiling too high", func(p *Policy) { p.Elastic.CeilingPercent = 1001 }, "got 1001%"},
		{"no signal", func(p *Policy) { p.Elastic.Signal = nil }, "elastic needs a capacity signal"},
		{"with soft", func(p *Policy) { p.SoftPercent = 10 }, "soft_percent and elastic are two throttling styles"},
		{"with count denied", func(p *Policy) { p.CountDenied = true }, "count_denied punishes"},
		{"with shadow", func(p *Policy) { p.Shadow = true }, "shadow (a dry run"},
		{"rounds to nothing", func(p *Policy) { p.Elastic.CeilingPercent = 105 }, "elastic ceiling 105% admits no request above it (10 × 105% rounds down to 10)"},
		{"above max", func(p *Policy) { p.Limits = []Limit{PerHour(maxRequests)} }, "the elastic ceiling 4294967294 exceeds"},
		{"log too long", func(p *Policy) { p.Algorithm = SlidingWindowLog; p.Limits = []Limit{PerHour(60_000)} }, "sliding log keeps one timestamp per request up to the elastic ceiling"},
		{"span", func(p *Policy) {
			p.Algorithm, p.Elastic.CeilingPercent = GCRA, 1000
			p.Limits = []Limit{Per(1, 366*24*time.Hour).WithBurst(10)}
		}, "the elastic ceiling × refill interval exceeds 30 years"},
		{"nil in AllSignals", func(p *Policy) { p.Elastic.Signal = AllSignals(sig, nil) }, "AllSignals argument 1 is nil"},
		{"empty AllSignals", func(p *Policy) { p.Elastic.Signal = AllSignals() }, "AllSignals() with no signal"},
		{"nested empty AllSignals", func(p *Policy) { p.Elastic.Signal = AllSignals(AllSignals()) }, "AllSignals() with no signal"},
		{"zero CapacityLimit", func(p *Policy) { p.Elastic.Signal = &CapacityLimit{} }, "build the capacity limit with core.NewCapacityLimit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := ok()
			tc.edit(&p)
			err := p.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	p := ok()
	require.NoError(t, p.Validate())
}
