package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestFleetSeriesBeforeTheFirstIncident (issue 37): the dashboard and the
// alerts read limitkit_breaker_state, fallbacks_total, syncs_total and
// sync_errors_total, which appeared only after a first transition,
// fallback or sync. Once WatchFleet says the tier exists, each is
// exported at zero (or its state) for every known policy; the tier's
// breakers, which report no policy, never make a policy="" series, and
// their aggregate state is 1 while any of them is open.
func TestFleetSeriesBeforeTheFirstIncident(t *testing.T) {
	m, reg := newRegistry(t)
	m.WatchPolicy(core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	m.WatchFleet()
	want := `
# HELP limitkit_breaker_state State of a store tier's circuit breaker: 0 closed, 1 open, 2 half-open.
# TYPE limitkit_breaker_state gauge
limitkit_breaker_state{policy="api"} 0
# HELP limitkit_fallbacks_total Decisions a store tier made locally because the remote store failed or its breaker was open.
# TYPE limitkit_fallbacks_total counter
limitkit_fallbacks_total{policy="api"} 0
# HELP limitkit_syncs_total Round trips of a store tier's write-back sync, by result: ok or error.
# TYPE limitkit_syncs_total counter
limitkit_syncs_total{result="error"} 0
limitkit_syncs_total{result="ok"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "limitkit_breaker_state", "limitkit_fallbacks_total", "limitkit_syncs_total"))
	require.Equal(t, 1, testutil.CollectAndCount(m, "limitkit_deny_cache_hits_total"), "api's, at zero")
	require.Equal(t, 5, testutil.CollectAndCount(m, "limitkit_sync_errors_total"), "every kind at zero")

	// two tier breakers (two Redis masters): one opens, the other opens
	// and closes again; the aggregate stays open until both have closed
	m.Observe(core.Event{Kind: core.EventBreaker, From: "closed", To: "open"})
	m.Observe(core.Event{Kind: core.EventBreaker, From: "closed", To: "open"})
	m.Observe(core.Event{Kind: core.EventBreaker, From: "open", To: "half_open"})
	m.Observe(core.Event{Kind: core.EventBreaker, From: "half_open", To: "closed"})
	state := func() string {
		return `
# HELP limitkit_breaker_state State of a store tier's circuit breaker: 0 closed, 1 open, 2 half-open.
# TYPE limitkit_breaker_state gauge
limitkit_breaker_state{policy="api"} `
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(state()+"1\n"), "limitkit_breaker_state"), "one breaker still open")
	m.Observe(core.Event{Kind: core.EventBreaker, From: "open", To: "half_open"})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(state()+"2\n"), "limitkit_breaker_state"), "half-open")
	m.Observe(core.Event{Kind: core.EventBreaker, From: "half_open", To: "closed"})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(state()+"0\n"), "limitkit_breaker_state"), "both closed")
	require.Equal(t, 3, testutil.CollectAndCount(m, "limitkit_breaker_transitions_total"), "api by state entered (open, half_open, closed), no policy=\"\"")
}
