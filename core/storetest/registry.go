package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// RunRegistry checks a storekit.PolicyRegistrar store (issue 22, item 1):
// two policies of one name and other limits fail at NewLimiter with a
// message that says what to change, whatever setting differs; equal
// policies share one quota; Release frees the name; core.Replacing takes
// it over.
// decideTimeout is the store deadline of the registry tests' Limiters: a
// test timeout, not production's 50 ms, which a loaded host under -race
// can spend before a live store answers (their subject is the registry).
const decideTimeout = 10 * time.Second

func RunRegistry(t *testing.T, f Factory) {
	base := core.Policy{Name: "same", Algorithm: core.SlidingWindowCounter, Buckets: 6, Limits: []core.Limit{core.PerMinute(2)}}
	t.Run("OtherLimitsFailAtConstruction", func(t *testing.T) { registryOtherLimitsFailAtConstruction(t, f, base) })
	t.Run("EqualPoliciesShareOneQuota", func(t *testing.T) { registryEqualPoliciesShareOneQuota(t, f, base) })
	t.Run("ReleaseFreesTheName", func(t *testing.T) { registryReleaseFreesTheName(t, f, base) })
	t.Run("ReplacingListsEveryLiveLimiter", func(t *testing.T) { registryReplacingListsEveryLiveLimiter(t, f, base) })
	t.Run("ReplacingTakesTheNameOver", func(t *testing.T) { registryReplacingTakesTheNameOver(t, f, base) })
}

// registryOtherLimitsFailAtConstruction: a second policy of base's name
// fails at NewLimiter, whatever setting differs, and the first still
// decides.
func registryOtherLimitsFailAtConstruction(t *testing.T, f Factory, base core.Policy) {
	for _, tc := range []struct {
		name string
		edit func(p *core.Policy)
	}{
		{"limit", func(p *core.Policy) { p.Limits = []core.Limit{core.PerMinute(5)} }},
		{"second limit", func(p *core.Policy) { p.Limits = append(p.Limits, core.PerHour(50)) }},
		{"algorithm", func(p *core.Policy) { p.Algorithm, p.Buckets = core.FixedWindow, 0 }},
		{"buckets", func(p *core.Policy) { p.Buckets = 12 }},
		{"soft percent", func(p *core.Policy) { p.SoftPercent = 50 }},
		{"count denied", func(p *core.Policy) { p.CountDenied = true }},
		{"shadow", func(p *core.Policy) { p.Shadow = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := f(t)
			a := core.MustNewLimiter(s, base, core.WithTimeout(decideTimeout))
			other := base
			other.Limits = append([]core.Limit(nil), base.Limits...)
			tc.edit(&other)
			_, err := core.NewLimiter(s, other, core.WithTimeout(decideTimeout))
			require.Error(t, err, "a second quota under one name must fail at construction")
			assert.ErrorContains(t, err, `policy name "same" is already used`)
			assert.ErrorContains(t, err, "give this policy its own name")
			// the first still decides, without a store error
			d, err := a.Allow(context.Background(), "k")
			require.NoError(t, err)
			assert.True(t, d.Allowed)
		})
	}
}

// registryEqualPoliciesShareOneQuota: Limiters of equal policies (fail
// mode aside) built per request share one quota.
func registryEqualPoliciesShareOneQuota(t *testing.T, f Factory, base core.Policy) {
	s := f(t)
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	ctx := context.Background()
	allowed := 0
	for i := 0; i < 20; i++ {
		p := base
		if i%2 == 1 {
			p.FailMode = core.FailClosed // not part of the state
		}
		l, err := core.NewLimiter(s, p, core.WithClock(clock), core.WithTimeout(decideTimeout))
		require.NoError(t, err)
		d, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
	}
	assert.Equal(t, 2, allowed, "Limiters built per request share one quota")
}

// registryReleaseFreesTheName: the last Release of a name's Limiters lets
// another policy take it; Release is idempotent.
func registryReleaseFreesTheName(t *testing.T, f Factory, base core.Policy) {
	s := f(t)
	ctx := context.Background()
	a1 := core.MustNewLimiter(s, base, core.WithTimeout(decideTimeout))
	a2 := core.MustNewLimiter(s, base, core.WithTimeout(decideTimeout))
	other := otherLimits(base)
	a1.Release()
	a1.Release() // idempotent: one claim ends once
	_, err := core.NewLimiter(s, other, core.WithTimeout(decideTimeout))
	require.Error(t, err, "a2 still holds the name")
	a2.Release()
	b, err := core.NewLimiter(s, other, core.WithTimeout(decideTimeout))
	require.NoError(t, err, "the last Release frees the name")
	allowed := 0
	for i := 0; i < 10; i++ {
		d, err := b.Allow(ctx, "k")
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
	}
	assert.Equal(t, 5, allowed)
}

// registryReplacingListsEveryLiveLimiter: core.Replacing takes a name over
// only when it lists every live Limiter of it.
func registryReplacingListsEveryLiveLimiter(t *testing.T, f Factory, base core.Policy) {
	s := f(t)
	ctx := context.Background()
	a1 := core.MustNewLimiter(s, base, core.WithTimeout(decideTimeout))
	a2 := core.MustNewLimiter(s, base, core.WithTimeout(decideTimeout))
	other := otherLimits(base)
	_, err := core.NewLimiter(s, other, core.Replacing(a1), core.WithTimeout(decideTimeout))
	require.ErrorContains(t, err, "2 live Limiters use it with other limits")
	_, err = a2.Allow(ctx, "k")
	require.NoError(t, err, "a refused takeover changes nothing")
	_, err = core.NewLimiter(s, other, core.Replacing(a1, a2), core.WithTimeout(decideTimeout))
	require.NoError(t, err)
	for _, a := range []*core.Limiter{a1, a2} {
		_, err = a.Allow(ctx, "k")
		require.NoError(t, err, "the replaced still decide until released")
	}
}

// registryReplacingTakesTheNameOver: core.Replacing gives the new policy a
// fresh quota while the replaced Limiter still decides.
func registryReplacingTakesTheNameOver(t *testing.T, f Factory, base core.Policy) {
	s := f(t)
	ctx := context.Background()
	a := core.MustNewLimiter(s, base, core.WithTimeout(decideTimeout))
	_, err := a.Allow(ctx, "k")
	require.NoError(t, err)
	other := otherLimits(base)
	b, err := core.NewLimiter(s, other, core.Replacing(a), core.WithTimeout(decideTimeout))
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		d, err := b.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed, "request %d under the new limits", i)
	}
	// a, in flight, still decides without an error until released
	_, err = a.Allow(ctx, "k")
	require.NoError(t, err)
	a.Release()
	// a's release ends nothing of b's claim
	_, err = core.NewLimiter(s, base, core.WithTimeout(decideTimeout))
	require.Error(t, err, "b still holds the name")
}

// otherLimits is base under other limits: 5 per minute.
func otherLimits(base core.Policy) core.Policy {
	other := base
	other.Limits = []core.Limit{core.PerMinute(5)}
	return other
}
