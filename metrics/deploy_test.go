package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// scrape runs real traffic through limiters observed by a Metrics (the
// embedded store over its key cap, a remote store that times out, an
// elastic policy) plus the fleet tier's breaker and sync events, then
// scrapes /metrics over HTTP and returns each sample line's series
// (name{sorted labels}) and the set of metric names.
func scrape(t *testing.T) (series map[string]bool, names map[string]bool) {
	t.Helper()
	m, reg := newRegistry(t)
	ctx := context.Background()
	st, err := memstore.New(memstore.WithMaxKeys(64))
	require.NoError(t, err)
	defer st.Close()
	m.WatchMemstore("default", st)
	api := core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}}
	m.WatchPolicy(api)
	l := core.MustNewLimiter(st, api, core.WithObserver(m))
	for i := range 1000 {
		_, err := l.Allow(ctx, fmt.Sprint("k", i%200))
		require.NoError(t, err)
	}
	remote := &flakyStore{states: map[string][]int64{}}
	r := core.MustNewLimiter(remote, api, core.WithObserver(m))
	for range 3 {
		_, _ = r.Allow(ctx, "k")
	}
	remote.err = context.DeadlineExceeded
	_, _ = r.Allow(ctx, "k")
	// the elastic variant on a store of its own: one store refuses one
	// name with two configurations
	est, err := memstore.New()
	require.NoError(t, err)
	defer est.Close()
	el := core.MustNewLimiter(est, core.Policy{Name: "api", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(1)},
		Elastic: &core.Elastic{CeilingPercent: 200, Signal: roomSignal{}}}, core.WithObserver(m))
	for range 2 {
		_, _ = el.Allow(ctx, "e")
	}
	// The fleet tier's events, as core/fleet reports them.
	m.Observe(core.Event{Kind: core.EventDenyCacheHit, Policy: "api"})
	m.Observe(core.Event{Kind: core.EventFallback, Policy: "api", Decision: core.Decision{Degraded: true}})
	m.Observe(core.Event{Kind: core.EventBreaker, Policy: "api", From: "closed", To: "open"})
	m.Observe(core.Event{Kind: core.EventSync, Keys: 3, Latency: time.Millisecond})
	m.Observe(core.Event{Kind: core.EventSync, Err: context.DeadlineExceeded, Latency: time.Millisecond})

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	series, names = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := line[:strings.LastIndexByte(line, ' ')]
		series[canonical(t, s)] = true
		names[seriesName(s)] = true
	}
	return series, names
}

func seriesName(s string) string {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		return s[:i]
	}
	return s
}

var labelRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"`)

// canonical returns s as name{label="value",...} with sorted labels.
func canonical(t *testing.T, s string) string {
	var labels []string
	for _, m := range labelRe.FindAllStringSubmatch(s, -1) {
		labels = append(labels, m[1]+"="+`"`+m[2]+`"`)
	}
	slices.Sort(labels)
	return seriesName(s) + "{" + strings.Join(labels, ",") + "}"
}

// TestDeployFilesUseRealSeries fails when the shipped rules, their
// promtool test or the dashboard name a metric a real scrape does not
// have, or when a promtool test input series (name and labels) does not
// appear in it: the rules are tested on series the package produces.
func TestDeployFilesUseRealSeries(t *testing.T) {
	series, names := scrape(t)
	files, err := filepath.Glob("../deploy/*")
	require.NoError(t, err)
	require.Len(t, files, 3, "rules, their promtool test, the dashboard")
	nameRe := regexp.MustCompile(`limitkit_[a-z_]+`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		used := nameRe.FindAllString(string(b), -1)
		require.NotEmpty(t, used, f)
		for _, n := range used {
			assert.True(t, names[n], "%s uses %s, which a scrape does not have", f, n)
		}
	}
	b, err := os.ReadFile("../deploy/limitkit-rules_test.yml")
	require.NoError(t, err)
	inputs := regexp.MustCompile(`series: '([^']+)'`).FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, inputs)
	for _, in := range inputs {
		assert.True(t, series[canonical(t, in[1])], "promtool input series %s is not in a real scrape", in[1])
	}
}
