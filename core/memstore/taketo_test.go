package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestTakeToAlternatingPolicies: Take and TakeTo on one store, with two
// policies used in turn (so that the store's last-used table never
// matches the next call), decide each policy as a store that only ever
// sees that policy.
func TestTakeToAlternatingPolicies(t *testing.T) {
	ctx := context.Background()
	pa := &core.Policy{Name: "a", Limits: []core.Limit{core.PerSecond(3)}}
	pb := &core.Policy{Name: "b", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerSecond(5)}}
	shared, onlyA, onlyB := mustNew(), mustNew(), mustNew()
	defer shared.Close()
	defer onlyA.Close()
	defer onlyB.Close()
	now := t0
	for i := 0; i < 40; i++ {
		p, ref := pa, onlyA
		if i%2 == 1 {
			p, ref = pb, onlyB
		}
		want, err := ref.Take(ctx, "k", p, now, 1)
		require.NoError(t, err)
		var got core.Decision
		if i%4 < 2 {
			err = shared.takeTo("k", p, now, 1, &got)
		} else {
			got, err = shared.Take(ctx, "k", p, now, 1)
		}
		require.NoError(t, err)
		require.Equal(t, want, got, "call %d (%s)", i, p.Name)
		now = now.Add(90 * time.Millisecond)
	}
}

// TestTakeToAfterClose: a store that has decided (its last-used table is
// set) answers ErrClosed after Close, through Take and TakeTo alike, with
// the policy's name and nothing else in the decision.
func TestTakeToAfterClose(t *testing.T) {
	ctx := context.Background()
	p := gcraPolicy("g")
	s := mustNew()
	var d core.Decision
	require.NoError(t, s.takeTo("k", p, t0, 1, &d))
	require.True(t, d.Allowed)
	require.NoError(t, s.Close())
	d = core.Decision{Allowed: true, Remaining: 7}
	assert.ErrorIs(t, s.takeTo("k", p, t0, 1, &d), core.ErrClosed)
	assert.Equal(t, core.Decision{Policy: "g"}, d)
	d, err := s.Take(ctx, "k", p, t0, 1)
	assert.ErrorIs(t, err, core.ErrClosed)
	assert.Equal(t, core.Decision{Policy: "g"}, d)
}
