package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

type roomSignal struct{}

func (roomSignal) Acquire(context.Context, int64) (bool, error) { return true, nil }

// An elastic admission is counted as outcome="elastic", not "allowed", on a
// real limiter over the embedded store, and the scrape says so.
func TestElasticOutcome(t *testing.T) {
	m, reg := newRegistry(t)
	st, err := memstore.New()
	require.NoError(t, err)
	defer st.Close()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l := core.MustNewLimiter(st, core.Policy{Name: "el", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(2)},
		Elastic: &core.Elastic{CeilingPercent: 200, Signal: roomSignal{}}}, core.WithObserver(m), core.WithClock(clk))
	var elastic int
	for range 5 { // 2 nominal, 2 elastic (ceiling 4), 1 denied
		d, err := l.Allow(context.Background(), "k")
		require.NoError(t, err)
		if d.Elastic {
			elastic++
		}
	}
	require.Equal(t, 2, elastic)
	for outcome, want := range map[string]float64{"allowed": 2, "elastic": 2, "denied": 1, "shadowed": 0, "degraded": 0} {
		assert.Equal(t, want, gauge(t, reg, "limitkit_decisions_total", map[string]string{"policy": "el", "outcome": outcome}), outcome)
	}
}

// WatchPolicy exports each configured limit once per policy and limit
// index, replaces a policy watched again under its name, and labels no key.
func TestConfiguredLimitGauge(t *testing.T) {
	m, reg := newRegistry(t)
	p := core.Policy{Name: "api", Limits: []core.Limit{core.PerSecond(10), core.PerHour(1000)}}
	m.WatchPolicy(p)
	p.Limits[0].Requests = 99 // WatchPolicy copied the limits
	m.WatchPolicy(core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(5)}})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP limitkit_limit_requests Configured limits of the policies passed to WatchPolicy: the requests (cost units) a key may spend per window, by policy, limit (its index in Policy.Limits) and window (seconds).
# TYPE limitkit_limit_requests gauge
limitkit_limit_requests{limit="0",policy="api",window="1"} 10
limitkit_limit_requests{limit="1",policy="api",window="3600"} 1000
limitkit_limit_requests{limit="0",policy="login",window="60"} 5
`), "limitkit_limit_requests"))

	m.WatchPolicy(core.Policy{Name: "login", Limits: []core.Limit{core.Per(7, 1500*time.Millisecond)}}) // a reload
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP limitkit_limit_requests Configured limits of the policies passed to WatchPolicy: the requests (cost units) a key may spend per window, by policy, limit (its index in Policy.Limits) and window (seconds).
# TYPE limitkit_limit_requests gauge
limitkit_limit_requests{limit="0",policy="api",window="1"} 10
limitkit_limit_requests{limit="1",policy="api",window="3600"} 1000
limitkit_limit_requests{limit="0",policy="login",window="1.5"} 7
`), "limitkit_limit_requests"))
}
