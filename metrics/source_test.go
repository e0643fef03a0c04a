package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/metrics"
)

func TestLimitSourceSeries(t *testing.T) {
	m, err := metrics.New()
	require.NoError(t, err)
	def := core.MustNewLimiter(memstore.MustNew(), core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(5)}}, core.WithObserver(m))
	src := func(_ context.Context, id string) ([]core.Limit, bool, error) {
		switch id {
		case "acme":
			return []core.Limit{core.PerMinute(9)}, true, nil
		case "down":
			return nil, false, errors.New("db down")
		case "slow":
			return nil, false, context.DeadlineExceeded
		}
		return nil, false, nil
	}
	s, err := core.NewSourced(def, src, core.SourceConfig{Timeout: time.Hour}) // no lookup times out on a loaded host
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range []string{"acme", "acme", "acme", "nobody", "nobody", "down", "slow"} {
		s.Select(ctx, id)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "limitkit_limit_source_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range mt.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["policy"] == "api" {
				got[l["result"]] = mt.GetCounter().GetValue()
			}
		}
	}
	count := func(result string) float64 { return got[result] }
	assert.Equal(t, 1.0, count("found"))
	assert.Equal(t, 1.0, count("not_found"))
	assert.Equal(t, 1.0, count("error"))
	assert.Equal(t, 1.0, count("timeout"))
	assert.Equal(t, 3.0, count("hit"))
	assert.Equal(t, 2.0, count("fallback"))
}
