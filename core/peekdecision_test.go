package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// PeekDecision answers as PeekN and consumes nothing, but the observer
// sees an EventDecision (allowed, then denied on an exhausted key), not an
// EventVerb "peek": a request counted by outcome is a decision to the metrics.
func TestPeekDecisionIsADecision(t *testing.T) {
	ms := mustMem()
	defer ms.Close()
	var kinds []string
	obs := core.ObserverFunc(func(e core.Event) {
		kinds = append(kinds, kindOf(e)+"/"+map[bool]string{true: "allowed", false: "denied"}[e.Decision.Allowed])
	})
	l := core.MustNewLimiter(ms, core.Policy{Name: "login", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(1)}},
		core.WithObserver(obs), core.WithClock(core.NewManualClock(time.Unix(1_700_000_000, 0))))
	ctx := context.Background()
	d, err := l.PeekDecision(ctx, "k", 1)
	require.NoError(t, err)
	p, err := l.PeekN(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, p, d, "PeekDecision answers as PeekN, and consumed nothing")
	assert.True(t, d.Allowed)
	_, err = l.Charge(ctx, "k", 1)
	require.NoError(t, err)
	d, err = l.PeekDecision(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, []string{"decision/allowed", "peek/allowed", "charge/denied", "decision/denied"}, kinds)
}
