package core_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

func tierLimiter(t testing.TB, store core.Store, name string, n int64) *core.Limiter {
	t.Helper()
	l, err := core.NewLimiter(store, core.Policy{Name: name, Limits: []core.Limit{core.PerMinute(n)}})
	require.NoError(t, err)
	return l
}

// TestTiersEachTierItsOwnQuota: a free, a pro and an overridden client
// each get exactly their own quota, and a client whose tier changes
// starts afresh on the new tier's (the counters never mix).
func TestTiersEachTierItsOwnQuota(t *testing.T) {
	store := mustMem()
	defer store.Close()
	def := tierLimiter(t, store, "api", 2)
	tiers, err := core.NewTiers(def,
		map[string]*core.Limiter{"pro": tierLimiter(t, store, "api/pro", 5)},
		map[string]*core.Limiter{"key/big": tierLimiter(t, store, "api/o-1", 7)})
	require.NoError(t, err)
	ctx := context.Background()
	admitted := func(tier, key string) int {
		n := 0
		for range 10 {
			if d, err := tiers.Select(tier, key).AllowN(ctx, key, 1); err == nil && d.Allowed {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 2, admitted("free", "alice"), "an unknown tier is the default")
	assert.Equal(t, 2, admitted("", "carol"), "a missing tier is the default")
	assert.Equal(t, 5, admitted("pro", "alice"), "alice upgraded: a fresh pro quota")
	assert.Equal(t, 7, admitted("free", "key/big"), "an override beats the tier")
}

func TestNewTiersRefuses(t *testing.T) {
	store := mustMem()
	defer store.Close()
	def := tierLimiter(t, store, "api", 2)
	other := tierLimiter(t, store, "api/pro", 2)
	_, err := core.NewTiers(nil, nil, nil)
	assert.ErrorContains(t, err, "nil default")
	_, err = core.NewTiers(def, map[string]*core.Limiter{"pro": def}, nil)
	assert.ErrorContains(t, err, "counters would mix")
	_, err = core.NewTiers(def, map[string]*core.Limiter{"pro": other}, map[string]*core.Limiter{"k": other})
	assert.ErrorContains(t, err, "counters would mix")
	_, err = core.NewTiers(def, map[string]*core.Limiter{"": other}, nil)
	assert.ErrorContains(t, err, "empty tier")
	_, err = core.NewTiers(def, map[string]*core.Limiter{"pro": nil}, nil)
	assert.ErrorContains(t, err, "nil limiter")
	many := map[string]*core.Limiter{}
	for i := range core.MaxTiers + 1 {
		many[strconv.Itoa(i)] = tierLimiter(t, store, "api/t"+strconv.Itoa(i), 1)
	}
	_, err = core.NewTiers(def, many, nil)
	assert.ErrorContains(t, err, "at most 16")
}

// Plans: the limiter is chosen by the caller's tier, with a default for
// a missing or unknown tier and an override for one customer's key.
func ExampleTiers() {
	store := mustMem()
	defer store.Close()
	mk := func(name string, n int64) *core.Limiter {
		return core.MustNewLimiter(store, core.Policy{Name: name, Limits: []core.Limit{core.PerMinute(n)}})
	}
	tiers, _ := core.NewTiers(mk("api", 100), // free, and any unknown plan
		map[string]*core.Limiter{"pro": mk("api/pro", 1000), "enterprise": mk("api/enterprise", 10000)},
		map[string]*core.Limiter{"key/k_bigcustomer": mk("api/bigcustomer", 50000)})
	for _, c := range []struct{ tier, key string }{{"pro", "user/alice"}, {"gold", "user/bob"}, {"pro", "key/k_bigcustomer"}} {
		l := tiers.Select(c.tier, c.key)
		d, _ := l.Allow(context.Background(), c.key)
		fmt.Println(c.key, l.Policy().Name, d.Limit.Requests)
	}
	// Output:
	// user/alice api/pro 1000
	// user/bob api 100
	// key/k_bigcustomer api/bigcustomer 50000
}

// TestNewTiersCapsAreExact: exactly core.MaxTiers tiers and MaxOverrides
// overrides are accepted, one more of either is refused (the boundary
// itself, not only far beyond it).
func TestNewTiersCapsAreExact(t *testing.T) {
	store := mustMem(memstore.WithMaxPolicies(4 * core.MaxOverrides))
	defer store.Close()
	def := tierLimiter(t, store, "api", 1)
	limiters := func(prefix string, n int) map[string]*core.Limiter {
		m := make(map[string]*core.Limiter, n)
		for i := range n {
			m[strconv.Itoa(i)] = tierLimiter(t, store, prefix+strconv.Itoa(i), 1)
		}
		return m
	}
	tiers, err := core.NewTiers(def, limiters("api/t", core.MaxTiers), nil)
	require.NoError(t, err, "core.MaxTiers tiers are allowed")
	assert.Same(t, def, tiers.Select("none", "k"), "an unknown tier is the default")
	_, err = core.NewTiers(def, limiters("api/u", core.MaxTiers+1), nil)
	assert.ErrorContains(t, err, fmt.Sprintf("%d tiers, at most %d", core.MaxTiers+1, core.MaxTiers))

	tiers, err = core.NewTiers(def, nil, limiters("api/o", core.MaxOverrides))
	require.NoError(t, err, "MaxOverrides overrides are allowed")
	assert.NotSame(t, def, tiers.Select("", "0"), "an override applies")
	_, err = core.NewTiers(def, nil, limiters("api/p", core.MaxOverrides+1))
	assert.ErrorContains(t, err, fmt.Sprintf("%d overrides, at most %d", core.MaxOverrides+1, core.MaxOverrides))
}
