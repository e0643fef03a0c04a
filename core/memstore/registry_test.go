package memstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestLimitersBuiltPerRequestShareQuota: building a Limiter per request
// from one policy value (a new *Policy each time) must limit, not give
// every request a fresh quota, and must not grow the store.
func TestLimitersBuiltPerRequestShareQuota(t *testing.T) {
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			s := mustNew()
			defer s.Close()
			clock := core.NewManualClock(t0)
			policy := core.Policy{Name: "login", Algorithm: alg, Limits: []core.Limit{core.PerMinute(100)}}
			allowed := 0
			for i := 0; i < 10_000; i++ {
				l := core.MustNewLimiter(s, policy, core.WithClock(clock))
				d, err := l.Allow(context.Background(), "alice")
				require.NoError(t, err)
				if d.Allowed {
					allowed++
				}
			}
			assert.Equal(t, 100, allowed, "the limiters share one quota")
			st := s.Stats()
			assert.Equal(t, 1, st.Policies)
			assert.Equal(t, 1, st.Keys)
		})
	}
}

func TestPolicyNamesAreCapped(t *testing.T) {
	s := mustNew(WithMaxPolicies(3))
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := s.Take(ctx, "k", gcraPolicy("p"+strconv.Itoa(i)), t0, 1)
		require.NoError(t, err)
	}
	_, err := s.Take(ctx, "k", gcraPolicy("p3"), t0, 1)
	assert.ErrorContains(t, err, "WithMaxPolicies")
	assert.ErrorContains(t, err, "put per-client variation in the key")
	// the known names still work, through any pointer
	d, err := s.Take(ctx, "k", gcraPolicy("p0"), t0, 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, 3, s.Stats().Policies)
	_, err = newMem(WithMaxPolicies(0))
	assert.ErrorContains(t, err, "WithMaxPolicies(0)")
}

// TestSameNameMustDecideAlike: a policy sharing a name shares state only
// when it decides alike; FailMode is the Limiter's and may differ.
func TestSameNameMustDecideAlike(t *testing.T) {
	base := core.Policy{Name: "same", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(2)}}
	for _, tc := range []struct {
		name     string
		edit     func(p *core.Policy)
		conflict bool
	}{
		{"identical", func(*core.Policy) {}, false},
		{"fail mode", func(p *core.Policy) { p.FailMode = core.FailClosed }, false},
		{"limit", func(p *core.Policy) { p.Limits = []core.Limit{core.PerMinute(3)} }, true},
		{"algorithm", func(p *core.Policy) { p.Algorithm = core.SlidingWindowLog }, true},
		{"soft percent", func(p *core.Policy) { p.SoftPercent = 50 }, true},
		{"count denied", func(p *core.Policy) { p.CountDenied = true }, true},
		{"shadow", func(p *core.Policy) { p.Shadow = true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew()
			defer s.Close()
			ctx := context.Background()
			first := base
			_, err := s.Take(ctx, "k", &first, t0, 1)
			require.NoError(t, err)
			other := base
			other.Limits = append([]core.Limit(nil), base.Limits...)
			tc.edit(&other)
			d, err := s.Take(ctx, "k", &other, t0, 1)
			if tc.conflict {
				assert.ErrorContains(t, err, "different limits")
				assert.Equal(t, "same", d.Policy)
				return
			}
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			d, err = s.Take(ctx, "k", &other, t0, 1)
			require.NoError(t, err)
			assert.False(t, d.Allowed, "one quota for both pointers")
		})
	}
}

func TestNilPolicyIsAnError(t *testing.T) {
	s := mustNew()
	defer s.Close()
	_, err := s.Take(context.Background(), "k", nil, t0, 1)
	assert.ErrorContains(t, err, "nil policy")
}

// BenchmarkLimiterPerRequest builds a Limiter for every request from one
// policy value: the anti-pattern must stay cheap and flat (it used to copy
// a growing table map under a global lock per Limiter).
func BenchmarkLimiterPerRequest(b *testing.B) {
	s := mustNew()
	defer s.Close()
	ctx := context.Background()
	policy := core.Policy{Name: "api", Limits: []core.Limit{core.Per(1<<30, 30*24*time.Hour)}}
	clock := core.NewManualClock(t0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		l := core.MustNewLimiter(s, policy, core.WithClock(clock))
		if d, err := l.Allow(ctx, "user:42"); err != nil || !d.Allowed {
			b.Fatal("denied", err)
		}
	}
}
