package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// TestPeekIsNotADecision (issue 22, item 7): a peek (cost 0) used to be
// counted as an allowed decision, even for an exhausted key.
func TestPeekIsNotADecision(t *testing.T) {
	m, reg := newRegistry(t)
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	st := &flakyStore{states: map[string][]int64{}}
	l := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(1)}}, core.WithClock(clk), core.WithObserver(m))
	ctx := context.Background()
	_, _ = l.Allow(ctx, "k")
	for range 3 {
		_, _ = l.AllowN(ctx, "k", 0)
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP limitkit_decisions_total Decisions by policy and outcome: allowed, denied, shadowed (a shadow policy would have denied), elastic (admitted above the limits by elastic throttling), degraded (the store failed; the fail mode decided).
# TYPE limitkit_decisions_total counter
limitkit_decisions_total{outcome="allowed",policy="p"} 1
limitkit_decisions_total{outcome="degraded",policy="p"} 0
limitkit_decisions_total{outcome="denied",policy="p"} 0
limitkit_decisions_total{outcome="elastic",policy="p"} 0
limitkit_decisions_total{outcome="shadowed",policy="p"} 0
`), "limitkit_decisions_total"))
}

// Charge, Refund and Reset are their own event kinds (issue 28): not
// decisions, so not counted.
func TestVerbsAreNotDecisions(t *testing.T) {
	m, reg := newRegistry(t)
	st := memstore.MustNew()
	defer st.Close()
	l := core.MustNewLimiter(st, core.Policy{Name: "v", Limits: []core.Limit{core.PerMinute(1)}}, core.WithObserver(m))
	ctx := context.Background()
	_, _ = l.Allow(ctx, "k")
	_, _ = l.Charge(ctx, "k", 5) // reports the key denied: not a denial
	_, _ = l.Refund(ctx, "k", 5)
	_, _ = l.PeekN(ctx, "k", 1)
	require.NoError(t, l.Reset(ctx, "k"))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP limitkit_decisions_total Decisions by policy and outcome: allowed, denied, shadowed (a shadow policy would have denied), elastic (admitted above the limits by elastic throttling), degraded (the store failed; the fail mode decided).
# TYPE limitkit_decisions_total counter
limitkit_decisions_total{outcome="allowed",policy="v"} 1
limitkit_decisions_total{outcome="degraded",policy="v"} 0
limitkit_decisions_total{outcome="denied",policy="v"} 0
limitkit_decisions_total{outcome="elastic",policy="v"} 0
limitkit_decisions_total{outcome="shadowed",policy="v"} 0
`), "limitkit_decisions_total"))
}
