package rules

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

const elasticYAML = `
defaults:
  elastic: {ceiling: 150%, max_in_flight: 64}
rules:
  - name: api
    route: /api
    limits: ["10 per 1m"]
    algorithm: fixed_window
    elastic: {ceiling: 200%, capacity: "5 per 1m"}
  - name: both
    route: /both
    limits: ["10 per 1m"]
    elastic: {ceiling: 2.5x, capacity: "100 per 1h", max_in_flight: 8}
  - name: inherits
    route: /inherits
    limits: ["10 per 1m"]
  - name: hard
    route: /hard
    limits: ["10 per 1m"]
    elastic: off
descriptors:
  - domain: auth
    key: login
    unit: minute
    requests: 10
    elastic: {ceiling: 300, capacity: "20 per 1m"}
`

func TestElasticRulesParse(t *testing.T) {
	for _, format := range []syntax{syntaxYAML, syntaxJSON} {
		t.Run(format.String(), func(t *testing.T) {
			src := mustParse(t, elasticYAML)
			data := []byte(elasticYAML)
			if format == syntaxJSON {
				var err error
				data, err = src.encodeJSON()
				require.NoError(t, err)
			}
			s, err := parse(data, format)
			require.NoError(t, err)
			get := func(name string) *Rule {
				r, ok := s.Rule(name)
				require.True(t, ok, name)
				return r
			}
			assert.Equal(t, &Elastic{CeilingPercent: 200, Capacity: core.PerMinute(5)}, get("api").Elastic)
			assert.Equal(t, &Elastic{CeilingPercent: 250, Capacity: core.PerHour(100), MaxInFlight: 8}, get("both").Elastic)
			assert.Equal(t, &Elastic{CeilingPercent: 150, MaxInFlight: 64}, get("inherits").Elastic)
			assert.Nil(t, get("hard").Elastic)
			d, ok := s.Descriptor("auth", "login")
			require.True(t, ok)
			assert.Equal(t, &Elastic{CeilingPercent: 300, Capacity: core.PerMinute(20)}, d.Elastic)

			// the encoding reads back to an equal set
			y, err := s.encodeYAML()
			require.NoError(t, err)
			back, err := parse(y, syntaxYAML)
			require.NoError(t, err)
			noLines := func(rs []Rule, ds []Descriptor) ([]Rule, []Descriptor) {
				for i := range rs {
					rs[i].Line = 0
				}
				for i := range ds {
					ds[i].Line = 0
				}
				return rs, ds
			}
			r1, d1 := noLines(s.Rules(), append([]Descriptor(nil), s.descriptors...))
			r2, d2 := noLines(back.Rules(), append([]Descriptor(nil), back.descriptors...))
			assert.Equal(t, r1, r2)
			assert.Equal(t, d1, d2)
		})
	}
}

func TestElasticRulesErrors(t *testing.T) {
	rule := func(el string, extra ...string) string {
		return "rules:\n  - name: api\n    route: /api\n    limits: [\"10 per 1m\"]\n" + strings.Join(extra, "") + "    elastic: " + el + "\n"
	}
	cases := []struct{ name, src, want string }{
		{"no ceiling", rule(`{capacity: "5 per 1m"}`), `line 5: rules[0] "api": elastic: no ceiling`},
		{"ceiling 100%", rule(`{ceiling: 100%, capacity: "5 per 1m"}`), `ceiling "100%" must be above 100% and at most 1000%`},
		{"ceiling words", rule(`{ceiling: lots, capacity: "5 per 1m"}`), `ceiling "lots": write a percentage above 100% ("200%") or a multiple above 1 ("2x")`},
		{"ceiling 1x", rule(`{ceiling: 1x, capacity: "5 per 1m"}`), `ceiling "1x" must be above 1x and at most 10x`},
		{"ceiling rounds to 1x", rule(`{ceiling: 1.004x, capacity: "5 per 1m"}`), `ceiling "1.004x" is 100% in whole percent, not above 100%: write at least 1.01x`},
		{"no signal", rule(`{ceiling: 200%}`), "elastic: no capacity signal"},
		{"bad capacity", rule(`{ceiling: 200%, capacity: "5 per fortnight"}`), "elastic: capacity:"},
		{"negative in flight", rule(`{ceiling: 200%, max_in_flight: -1}`), "max_in_flight: -1 must be > 0"},
		{"unknown field", rule(`{ceiling: 200%, capacty: "5 per 1m"}`), `unknown field "capacty" (did you mean "capacity"?)`},
		{"not a mapping", rule(`[200]`), "elastic is a mapping"},
		{"with soft", rule(`{ceiling: 200%, max_in_flight: 4}`, "    soft_percent: 10\n"), "soft_percent and elastic are two throttling styles"},
		{"with shadow", rule(`{ceiling: 200%, max_in_flight: 4}`, "    shadow: true\n"), "shadow (a dry run that only reports denials) and elastic"},
		{"rounds to nothing", rule(`{ceiling: 105%, max_in_flight: 4}`), "elastic ceiling 105% admits no request above it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse([]byte(tc.src), syntaxYAML)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := parse([]byte(`{"rules":[{"name":"api","route":"/api","limits":["10 per 1m"],"elastic":{"ceiling":"200%","max":3}}]}`), syntaxJSON)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown field "max"`)
}

// TestElasticRuleSignals: a Set fresh from Parse decides an elastic rule
// as its hard limit (its signal never has room); WithSignals builds the
// capacity limit on the store and the load signal on the counter, and
// keeps the capacity Limiter of an unchanged capacity across reloads.
func TestElasticRuleSignals(t *testing.T) {
	s := mustParse(t, elasticYAML)
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Unix(1_767_000_000-1_767_000_000%60, 0))
	ctx := context.Background()
	r, _ := s.Rule("api")

	hard, err := core.NewLimiter(store, r.Policy(), core.WithClock(clock))
	require.NoError(t, err)
	admitted := 0
	for i := 0; i < 30; i++ {
		d, err := hard.Allow(ctx, "placeholder")
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
	}
	assert.Equal(t, 10, admitted, "without signals: the hard limit")

	var inflight core.InFlight
	sigs := NewSignals(SignalEnv{Store: store, InFlight: &inflight, Options: []core.Option{core.WithClock(clock)}})
	ws, err := s.WithSignals(sigs)
	require.NoError(t, err)
	r, _ = ws.Rule("api")
	l, err := core.NewLimiter(store, r.Policy(), core.WithClock(clock))
	require.NoError(t, err)
	var nominal, elastic int
	for i := 0; i < 30; i++ {
		d, err := l.Allow(ctx, "u1")
		require.NoError(t, err)
		switch {
		case d.Elastic:
			elastic++
		case d.Allowed:
			nominal++
		}
	}
	assert.Equal(t, 10, nominal)
	assert.Equal(t, 5, elastic, "the rule's capacity limit (5 per 1m) binds before the ceiling (20)")

	// a reload of the same file: equal policies (a Live keeps the Limiter)
	again, err := mustParse(t, elasticYAML).WithSignals(sigs)
	require.NoError(t, err)
	for i, p := range ws.Policies() {
		assert.True(t, reflect.DeepEqual(p, again.Policies()[i]), "policy %s", p.Name)
	}
	b1, _ := ws.Rule("both")
	b2, _ := again.Rule("both")
	assert.True(t, reflect.DeepEqual(b1.Policy(), b2.Policy()))

	_, err = s.WithSignals(NewSignals(SignalEnv{Store: store}))
	assert.ErrorContains(t, err, "max_in_flight needs the middleware's in-flight counter")
	_, err = s.WithSignals(NewSignals(SignalEnv{InFlight: &inflight}))
	assert.ErrorContains(t, err, "capacity needs a store")
	none, err := s.WithSignals(nil)
	require.NoError(t, err)
	r, _ = none.Rule("api")
	ok, _ := r.Policy().Elastic.Signal.Acquire(ctx, 1)
	assert.False(t, ok)
	hr, _ := ws.Rule("hard")
	assert.Nil(t, hr.Policy().Elastic)

	long := strings.Repeat("n", 60)
	assert.Len(t, capacityName(long, core.PerMinute(5)), 64)
	assert.NotEqual(t, capacityName("api", core.PerMinute(5)), capacityName("api", core.PerMinute(6)))
	assert.Regexp(t, `^capacity:api:[0-9a-f]{8}$`, capacityName("api", core.PerMinute(5)))
}

// TestElasticLive: an elastic rule served through a Live with its
// signals: a reload of the same file keeps the rule's Limiter, its state
// and its capacity limit's state; a changed ceiling is a limits change
// (the rule starts afresh on memstore).
func TestElasticLive(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Unix(1_767_000_000-1_767_000_000%60, 0))
	var inflight core.InFlight
	sigs := NewSignals(SignalEnv{Store: store, InFlight: &inflight, Options: []core.Option{core.WithClock(clock)}})
	load := func(src string) *Set {
		s, err := mustParse(t, src).WithSignals(sigs)
		require.NoError(t, err)
		return s
	}
	live, err := NewLive[struct{}](store, load(elasticYAML), nil, core.WithClock(clock))
	require.NoError(t, err)
	ctx := context.Background()
	take := func(n int) (nominal, elastic int) {
		snap := live.Acquire()
		defer snap.Release()
		r := snap.Set().Match("GET", "/api", false)
		require.NotNil(t, r)
		for i := 0; i < n; i++ {
			d, err := snap.Limiter(r).Allow(ctx, "u1")
			require.NoError(t, err)
			switch {
			case d.Elastic:
				elastic++
			case d.Allowed:
				nominal++
			}
		}
		return
	}
	n, e := take(12)
	assert.Equal(t, []int{10, 2}, []int{n, e})
	ch, err := live.Swap(load(elasticYAML))
	require.NoError(t, err)
	assert.Empty(t, ch.LimitsChanged)
	n, e = take(10)
	assert.Equal(t, []int{0, 3}, []int{n, e}, "state kept: the capacity limit (5) has 3 left")

	ch, err = live.Swap(load(strings.Replace(elasticYAML, "ceiling: 200%, capacity", "ceiling: 300%, capacity", 1)))
	require.NoError(t, err)
	require.Len(t, ch.LimitsChanged, 1)
	assert.Equal(t, "api", ch.LimitsChanged[0].Name)
	n, e = take(12)
	assert.Equal(t, []int{10, 0}, []int{n, e}, "afresh on memstore; the unchanged capacity limit stays spent")

	// ReloadFile gives the new set the current set's signals: the same file
	// reloads as unchanged, and the rule stays elastic
	path := filepath.Join(t.TempDir(), "rules.yaml")
	src := strings.Replace(elasticYAML, "ceiling: 200%, capacity: \"5 per 1m\"", "ceiling: 300%, capacity: \"50 per 1m\"", 1)
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	_, err = live.ReloadFile(path)
	require.NoError(t, err)
	clock.Advance(time.Minute)
	n, e = take(12)
	assert.Equal(t, []int{10, 2}, []int{n, e}, "elastic after ReloadFile")
	ch, err = live.ReloadFile(path)
	require.NoError(t, err)
	assert.Empty(t, ch.LimitsChanged)
	assert.Empty(t, ch.Updated, "the same file with the same signals changes nothing")
	n, e = take(2)
	assert.Equal(t, []int{0, 2}, []int{n, e}, "still elastic, state kept")
}
