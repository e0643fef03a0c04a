package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestBake: every bakeable template bakes with its policy's constants
// written in (no argument past the cost is read), policies with the same
// constants share one copy, a full cache falls back to the template, and
// a baked policy decides exactly as an unbaked one.
func TestBake(t *testing.T) {
	for alg, tmpl := range bakeable {
		if tmpl == "" {
			continue
		}
		o := &oven{max: 2}
		a := o.bake("x", tmpl, []any{int64(1000), int64(5), "1", int64(1 << 33)}[:3+boolInt(core.Algorithm(alg) == core.FixedWindow)])
		require.NotNil(t, a, "algorithm %d", alg)
		for _, arg := range []string{"ARGV[3]", "ARGV[4]", "ARGV[5]", "ARGV[6]"} {
			assert.NotContains(t, a.srcArg, arg, "algorithm %d", alg)
		}
		assert.Contains(t, a.srcArg, "ARGV[2]")
		assert.Same(t, a, o.bake("x", tmpl, []any{int64(1000), int64(5), "1", int64(1 << 33)}[:3+boolInt(core.Algorithm(alg) == core.FixedWindow)]))
		require.NotNil(t, o.bake("x", tmpl, []any{int64(1001), int64(5), "1", int64(1 << 33)}[:3+boolInt(core.Algorithm(alg) == core.FixedWindow)]))
		assert.Nil(t, o.bake("x", tmpl, []any{int64(1002), int64(5), "1", int64(1 << 33)}[:3+boolInt(core.Algorithm(alg) == core.FixedWindow)]), "full")
	}
	// a form bake does not replace leaves the template unbaked
	o := &oven{max: 10}
	assert.Nil(t, o.bake("y", "return ARGV[3] + 1", []any{int64(1)}))
	assert.True(t, strings.Contains(padded(luaFixedWindow1), "tonumber(ARGV[6])"))
	// tostring(ARGV[k]) becomes the constant's text: the fixed window
	// adds M's text for a cost of 1
	fw := o.bake("z", padded(luaFixedWindow1), []any{int64(1000), int64(5), "0", int64(1 << 33)})
	require.NotNil(t, fw)
	assert.Contains(t, fw.srcArg, "inc = '8589934592'")
	// and the multi-limit fixed window's list of each limit's M as text
	fw2 := o.bake("z2", padded(bakeableMulti[core.FixedWindow]), []any{"0", int64(1000), int64(5), int64(0), int64(1 << 33), int64(3000), int64(8), int64(0), int64(1 << 32)})
	require.NotNil(t, fw2)
	assert.Contains(t, fw2.srcArg, "local MT = {'8589934592', '4294967296'}")
	assert.NotContains(t, fw2.srcArg, "ARGV[4 * i + 3]")

	// baked and unbaked decide alike, step by step
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	type shape struct {
		alg    core.Algorithm
		limits []core.Limit
		tmpl   *script
	}
	two := []core.Limit{core.Per(5, time.Second), core.Per(8, 3*time.Second)}
	for _, sh := range []shape{
		{core.GCRA, two[:1], single[core.GCRA]},
		{core.TokenBucket, two[:1], single[core.TokenBucket]},
		{core.FixedWindow, two[:1], single[core.FixedWindow]},
		{core.GCRA, two, multi[core.GCRA]},
		{core.FixedWindow, two, multi[core.FixedWindow]},
	} {
		alg := sh.alg
		pb := mustPolicy(t, core.Policy{Name: "baked" + strconv.Itoa(len(sh.limits)), Algorithm: alg, CountDenied: alg == core.FixedWindow, Limits: sh.limits})
		pu := mustPolicy(t, core.Policy{Name: "unbaked" + strconv.Itoa(len(sh.limits)), Algorithm: alg, CountDenied: alg == core.FixedWindow, Limits: sh.limits})
		cb, err := s.policy(pb)
		require.NoError(t, err)
		require.Empty(t, cb.tail, "%s baked", alg)
		cu, err := s.compile(pu)
		require.NoError(t, err)
		cu.script, cu.tail = sh.tmpl, unbaked(t, s, pu)
		s.mu.Lock()
		s.compiled[pu] = cu
		s.mu.Unlock()
		now := epoch
		for i := range 40 {
			cost := int64(i % 4)
			db, err := s.Take(ctx, "k", pb, now, cost)
			require.NoError(t, err)
			du, err := s.Take(ctx, "k", pu, now, cost)
			require.NoError(t, err)
			du.Policy = db.Policy
			require.Equal(t, du, db, "%s step %d", alg, i)
			now = now.Add(time.Duration(i%7) * 37 * time.Millisecond)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unbaked is p's constants as arguments, as compile passes them when the
// cache is full.
func unbaked(t *testing.T, s *redisStore, p *core.Policy) []any {
	t.Helper()
	saved := bakery
	bakery = &oven{max: 0}
	defer func() { bakery = saved }()
	c, err := s.compile(p)
	require.NoError(t, err)
	require.NotEmpty(t, c.tail)
	return c.tail
}
