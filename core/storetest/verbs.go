package storetest

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/core/storekit"
)

// VerbOptions tunes RunVerbs.
type VerbOptions struct {
	// Stores is how many store instances share state (default 1); each
	// comes from the Factory, which must then return stores that share
	// state (clients of one Redis, fleet tiers in front of one Redis).
	Stores int
	// ResetBound is how long after a Reset through one instance another
	// may still deny from a cache of its own (the fleet tier's deny-cache
	// bound); 0: at once.
	ResetBound time.Duration
}

// verbPolicies are the policies RunVerbs runs: every algorithm with one
// limit of 10 an hour, and with a second limit of 30 per 4 hours.
func verbPolicies() []core.Policy {
	var ps []core.Policy
	for _, a := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		one := core.Policy{Name: "verbs-" + a.String(), Algorithm: a, Limits: []core.Limit{core.Per(10, time.Hour)}}
		two := core.Policy{Name: "verbs2-" + a.String(), Algorithm: a, Limits: []core.Limit{core.Per(10, time.Hour), core.Per(30, 4*time.Hour)}}
		if a == core.SlidingWindowCounter {
			one.Buckets, two.Buckets = 4, 4
		}
		ps = append(ps, one, two)
	}
	return ps
}

// chargeBound is the longest a huge Charge can make a request of cost 1
// wait under p (core's documented debt bounds), over its limits.
func chargeBound(p *core.Policy) time.Duration {
	var b time.Duration
	for _, l := range p.Limits {
		t := time.Duration(core.EmissionInterval(l)) * time.Microsecond
		w := l.Window
		switch p.Algorithm {
		case core.GCRA:
			w += t // one full quota owed, then the unit itself
		case core.TokenBucket:
			w *= 2
		case core.SlidingWindowCounter:
			w += l.Window / time.Duration(max(p.Buckets, 1))
		}
		b = max(b, w)
	}
	return b
}

// RunVerbs checks the quota verbs as a user of core.Limiter sees them,
// for every policy of verbPolicies, on stores that honour the now
// argument (a core.ManualClock drives the Limiters of every instance):
//
//   - Peek consumes nothing (a quota's worth of peeks, then the whole
//     quota is admitted), reports an exhausted key denied with the
//     RetryAfter a request would get, on every instance.
//   - Reset restores the full quota on every instance (within
//     ResetBound on the others): exactly the limit is admitted over all
//     of them afterwards.
//   - Charge past the limit is repaid before anything more is admitted:
//     denied a µs before the RetryAfter it reports, admitted at it; for
//     GCRA and the token bucket that wait covers the excess at the
//     refill rate; a huge charge waits no longer than the documented
//     bound.
//   - Refund never leaves a key above a fresh key's quota (a fresh key;
//     an exhausted key refunded 2^40), and returns what was taken.
//   - WaitN fails at once when the cost can never be admitted or the wait
//     would outlast the deadline (reserving nothing), and admits at once
//     when there is room.
func RunVerbs(t *testing.T, f Factory, o VerbOptions) {
	if o.Stores == 0 {
		o.Stores = 1
	}
	for _, p := range verbPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			clk := core.NewManualClock(conformkit.Epoch)
			var ls []*core.Limiter
			for range o.Stores {
				l, err := core.NewLimiter(f(t), p, core.WithClock(clk), core.WithTimeout(10*time.Second))
				require.NoError(t, err)
				ls = append(ls, l)
			}
			verbPeekReset(t, ls, clk, o)
			verbCharge(t, ls[0], clk)
			verbRefund(t, ls[0])
			verbWait(t, ls[0])
		})
	}
}

func allow(t *testing.T, l *core.Limiter, key string) core.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), key)
	require.NoError(t, err)
	return d
}

func peekN(t *testing.T, l *core.Limiter, key string, cost int64) core.Decision {
	t.Helper()
	d, err := l.PeekN(context.Background(), key, cost)
	require.NoError(t, err)
	return d
}

func verbPeekReset(t *testing.T, ls []*core.Limiter, clk *core.ManualClock, o VerbOptions) {
	ctx := context.Background()
	const n = 10
	d := peekN(t, ls[0], "peek", 1)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(n-1), d.Remaining, "a fresh key's peek")
	for i := range n {
		require.Equal(t, d, peekN(t, ls[i%len(ls)], "peek", 1), "a peek consumes nothing")
	}
	for i := range n {
		require.True(t, allow(t, ls[i%len(ls)], "peek").Allowed, "the quota is whole after %d peeks", n)
	}
	d = peekN(t, ls[0], "peek", 1)
	require.False(t, d.Allowed, "an exhausted key peeks denied")
	require.Positive(t, d.RetryAfter)
	for _, l := range ls {
		require.Equal(t, d, peekN(t, l, "peek", 1), "every instance peeks the same")
		a := allow(t, l, "peek") // denied: caches the denial on a fleet tier
		require.False(t, a.Allowed)
		require.Equal(t, d.RetryAfter, a.RetryAfter, "the peek's RetryAfter is the request's")
	}

	require.NoError(t, ls[0].Reset(ctx, "peek"))
	require.True(t, peekN(t, ls[0], "peek", n).Allowed, "a reset key has its full quota")
	clk.Advance(o.ResetBound)
	admitted := 0
	for i := range 2 * n {
		if allow(t, ls[(i+1)%len(ls)], "peek").Allowed {
			admitted++
		}
	}
	require.Equal(t, n, admitted, "after the reset, every instance admits, the limit in all (within %v)", o.ResetBound)
}

func verbCharge(t *testing.T, l *core.Limiter, clk *core.ManualClock) {
	ctx := context.Background()
	p := l.Policy()
	const n = 10
	d, err := l.Charge(ctx, "charge", n+n/2)
	require.NoError(t, err)
	require.False(t, d.Allowed, "a charge past the limit leaves the key in debt")
	require.Equal(t, int64(0), d.Remaining)
	if p.Algorithm == core.GCRA || p.Algorithm == core.TokenBucket {
		t1 := time.Duration(core.EmissionInterval(p.Limits[0])) * time.Microsecond
		require.GreaterOrEqual(t, d.RetryAfter, (n/2+1)*t1, "the excess is repaid at the refill rate before one more")
	}
	require.Equal(t, d.RetryAfter, peekN(t, l, "charge", 1).RetryAfter, "the charge reports what a request would get")
	clk.Advance(d.RetryAfter - time.Microsecond)
	require.False(t, allow(t, l, "charge").Allowed, "denied until the debt is repaid")
	clk.Advance(time.Microsecond)
	require.True(t, allow(t, l, "charge").Allowed, "admitted once it is")

	d, err = l.Charge(ctx, "huge", math.MaxInt64)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.LessOrEqual(t, d.RetryAfter, chargeBound(p), "a huge charge's debt is bounded")
	_, err = l.Charge(ctx, "huge", -1)
	require.ErrorIs(t, err, core.ErrInvalidCost)
}

func verbRefund(t *testing.T, l *core.Limiter) {
	ctx := context.Background()
	const n = 10
	d, err := l.Refund(ctx, "fresh", 5)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, int64(n), d.Remaining, "a fresh key gets nothing more")
	for range n {
		require.True(t, allow(t, l, "fresh").Allowed)
	}
	require.False(t, allow(t, l, "fresh").Allowed, "a refunded fresh key admits its quota, no more")

	for range 4 {
		require.True(t, allow(t, l, "part").Allowed)
	}
	d, err = l.Refund(ctx, "part", 2)
	require.NoError(t, err)
	require.Equal(t, int64(n-2), d.Remaining, "2 of the 4 taken are returned")

	d, err = l.Refund(ctx, "fresh", 1<<40)
	require.NoError(t, err)
	require.Equal(t, int64(n), d.Remaining, "an exhausted key refunded 2^40 has a fresh key's quota")
	admitted := 0
	for range n + 1 {
		if allow(t, l, "fresh").Allowed {
			admitted++
		}
	}
	require.Equal(t, n, admitted)
	_, err = l.Refund(ctx, "fresh", -1)
	require.ErrorIs(t, err, core.ErrInvalidCost)
}

func verbWait(t *testing.T, l *core.Limiter) {
	ctx := context.Background()
	const n = 10
	require.ErrorIs(t, l.WaitN(ctx, "wait", n+1), core.ErrNeverAdmitted)
	require.NoError(t, l.WaitN(ctx, "wait", n-1), "room: admitted at once")
	require.True(t, allow(t, l, "wait").Allowed)
	before := peekN(t, l, "wait", 1)
	require.False(t, before.Allowed, "the wait consumed its cost")
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.ErrorIs(t, l.Wait(dctx, "wait"), core.ErrWaitExceedsDeadline)
	require.Equal(t, before, peekN(t, l, "wait", 1), "nothing reserved")
}

// RunVerbsDifferential is [Run]'s differential for the quota verbs: it
// drives a storekit.VerbStore and core's model through the same
// random steps — Take, Peek, Charge, Credit and Reset, and Reserve when
// the store is a storekit.ReserveStore (at most 2s ahead) — on two keys, with
// the clock stepping back as well as forward and now and then a huge
// cost, and requires identical decisions step by step, for every policy
// of the suite's policies and the verbs' own policies. o.Steps is each sequence's length
// (default 300); the other options are not used. A store whose decisions
// are core's own (Options.CoreDecides) need not run it; one that does
// part of the arithmetic itself should, since [RunVerbs] checks the
// verbs' contract, not their exact results.
func RunVerbsDifferential(t *testing.T, f Factory, o Options) {
	if o.Steps == 0 {
		o.Steps = 300
	}
	const maxWait = 2 * time.Second
	for i, p := range append(conformkit.Policies(), verbPolicies()...) {
		t.Run(p.Name, func(t *testing.T) {
			s := f(t)
			vs, ok := s.(storekit.VerbStore)
			require.True(t, ok, "%T is not a storekit.VerbStore", s)
			rs, _ := s.(storekit.ReserveStore)
			verbs := "AAPCRX"
			if rs != nil {
				verbs += "W"
			}
			c, err := p.Compile()
			require.NoError(t, err)
			w := p.Limits[len(p.Limits)-1].Window
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			model := map[string][]int64{}
			ctx := context.Background()
			now := conformkit.Epoch
			for step := range o.Steps {
				switch x := rng.IntN(12); {
				case x == 0:
					now = now.Add(-time.Duration(rng.Int64N(int64(2 * w))))
				case x < 4:
				case x < 10:
					now = now.Add(time.Duration(rng.Int64N(int64(w / 4))))
				default:
					now = now.Add(time.Duration(rng.Int64N(int64(2 * w))))
				}
				cost := rng.Int64N(5)
				if rng.IntN(25) == 0 {
					cost = math.MaxInt64 - rng.Int64N(2)
				}
				key := []string{"a", "b"}[rng.IntN(2)]
				v := verbs[rng.IntN(len(verbs))]
				st, ok := model[key]
				if !ok {
					st = make([]int64, c.StateWords())
					model[key] = st
				}
				want := conformkit.ApplyVerb(c, st, v, now.UnixMicro(), cost, maxWait.Microseconds())
				var got core.Decision
				switch v {
				case 'A':
					got, err = vs.Take(ctx, key, &p, now, cost)
				case 'P':
					got, err = vs.Peek(ctx, key, &p, now, cost)
				case 'C':
					got, err = vs.Charge(ctx, key, &p, now, cost)
				case 'R':
					got, err = vs.Credit(ctx, key, &p, now, cost)
				case 'W':
					got, err = rs.Reserve(ctx, key, &p, now, cost, maxWait)
				case 'X':
					err = vs.Reset(ctx, key, &p)
				}
				require.NoError(t, err, "step %d: %c", step, v)
				got.Cached = false // where a store tier's denial came from, not what it is
				require.Equal(t, want, got, "step %d: %c key %q cost %d at %+v", step, v, key, cost, now.Sub(conformkit.Epoch))
			}
		})
	}
}
