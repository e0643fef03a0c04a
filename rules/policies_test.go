package rules_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/rules"
)

const plansYAML = `
rules:
  - name: api
    route: /v1/*
    identity: authenticated
    key: user
    tier: claim:plan
    tiers: {free: ["100 per 1m"], pro: ["1000 per 1m"], enterprise: ["10000 per 1m"], default: ["100 per 1m"]}
    overrides: {"key:k_bigcustomer": ["50000 per 1m"]}
  - name: login
    methods: [POST]
    route: /login
    key: form:username
    limits: ["10 per 15m"]
    count: {status: [401], reset_on: success}
    also:
      - {name: login-ip, key: ip, limits: ["100 per 15m"]}
`

func TestPlansAndLoginRules(t *testing.T) {
	s, err := rules.Parse([]byte(plansYAML))
	require.NoError(t, err)
	api, ok := s.Rule("api")
	require.True(t, ok)
	assert.Equal(t, "claim:plan", api.Tier)
	assert.Equal(t, []core.Limit{core.PerMinute(100)}, api.Limits, "tiers.default is the rule's own limits")
	require.Len(t, api.Tiers, 3)
	assert.Equal(t, "enterprise", api.Tiers[0].Name, "sorted by name")
	require.Len(t, api.Overrides, 1)
	assert.Equal(t, "key:k_bigcustomer", api.Overrides[0].Client)
	login, _ := s.Rule("login")
	assert.Equal(t, rules.Key{Kind: "form", Field: "username"}, login.Key)
	require.NotNil(t, login.Count)
	assert.True(t, login.Count.Counts(401))
	assert.False(t, login.Count.Counts(200))
	assert.True(t, login.Count.ResetOnSuccess)
	require.Len(t, login.Also, 1)
	assert.Equal(t, rules.Key{Kind: "ip"}, login.Also[0].Key)

	var names []string
	for _, p := range s.Policies() {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"api", "login", "api/enterprise", "api/free", "api/pro",
		rules.OverridePolicyName("api", "key:k_bigcustomer"), "login-ip"}, names)
	assert.NotContains(t, rules.OverridePolicyName("api", "key:k_bigcustomer"), "k_big", "an API key never names a policy")

	// both encodings read back to the same set
	for _, enc := range []func() ([]byte, error){func() ([]byte, error) { return rules.EncodeYAML(s) }, func() ([]byte, error) { return rules.EncodeJSON(s) }} {
		b, err := enc()
		require.NoError(t, err)
		again, err := rules.Parse(b)
		require.NoError(t, err, "%s", b)
		assert.Equal(t, s.Policies(), again.Policies())
		noLines := func(rs []rules.Rule) []rules.Rule {
			for i := range rs {
				rs[i].Line = 0
			}
			return rs
		}
		assert.Equal(t, noLines(s.Rules()), noLines(again.Rules()))
	}
}

func TestPoliciesErrors(t *testing.T) {
	rule := func(extra string) string {
		return "rules:\n  - name: api\n    route: /v1/*\n" + extra
	}
	tiers17 := "    tier: header:X-Plan\n    tiers: {default: [\"1 per 1m\"]"
	for i := range 17 {
		tiers17 += ", t" + strings.Repeat("x", i) + `: ["1 per 1m"]`
	}
	tiers17 += "}\n"
	for _, c := range []struct{ name, file, want string }{
		{"unknown tier source", rule("    tier: cookie:plan\n    tiers: {default: [\"1 per 1m\"]}\n"), `tier: unknown tier source "cookie:plan"`},
		{"missing default", rule("    tier: claim:plan\n    tiers: {pro: [\"1 per 1m\"]}\n"), "tiers: no default tier"},
		{"only a default", rule("    tier: claim:plan\n    tiers: {default: [\"1 per 1m\"]}\n"), "tiers: only a default tier"},
		{"default twice", rule("    limits: [\"1 per 1m\"]\n    tier: claim:plan\n    tiers: {default: [\"1 per 1m\"]}\n"), "in tiers.default or in limits, not both"},
		{"tiers without tier", rule("    tiers: {default: [\"1 per 1m\"]}\n"), "tiers: needs tier:"},
		{"tier without tiers", rule("    limits: [\"1 per 1m\"]\n    tier: claim:plan\n"), "tiers: is missing"},
		{"bad tier limit", rule("    tier: claim:plan\n    tiers: {default: [\"1 per 1m\"], pro: [\"lots\"]}\n"), `tiers.pro[0]: requests`},
		{"too many tiers", rule(tiers17), "17 tiers, at most 16"},
		{"bad tier name", rule("    tier: claim:plan\n    tiers: {default: [\"1 per 1m\"], \"a/b\": [\"1 per 1m\"]}\n"), `tier "a/b"`},
		{"bad override", rule("    limits: [\"1 per 1m\"]\n    overrides: {bob: [\"2 per 1m\"]}\n"), `client "bob": write user:<id>`},
		{"bad status", rule("    limits: [\"1 per 1m\"]\n    count: {status: \"bad\"}\n"), `status "bad"`},
		{"no status", rule("    limits: [\"1 per 1m\"]\n    count: {reset_on: success}\n"), "count needs status"},
		{"bad reset_on", rule("    limits: [\"1 per 1m\"]\n    count: {status: [401], reset_on: failure}\n"), `reset_on "failure"`},
		{"unknown count field", rule("    limits: [\"1 per 1m\"]\n    count: {status: [401], rest_on: success}\n"), `count: unknown field "rest_on" (did you mean "reset_on"?)`},
		{"unknown also field", rule("    limits: [\"1 per 1m\"]\n    also: [{name: x, key: ip, limits: [\"1 per 1m\"], limts: 2}]\n"), `also[0]: unknown field "limts"`},
		{"also name clash", rule("    limits: [\"1 per 1m\"]\n    also: [{name: api, key: ip, limits: [\"1 per 1m\"]}]\n"), `policy name "api" is already used`},
		{"bad form key", rule("    limits: [\"1 per 1m\"]\n    key: \"form:a=b\"\n"), "not a plain form field name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rules.Parse([]byte(c.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := rules.Parse([]byte(`{"rules":[{"name":"a","route":"/","limits":["1 per 1m"],"count":{"status":">=400","chrage":"first"}}]}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown field "chrage" (did you mean "charge"?)`)
	s, err := rules.Parse([]byte(`{"rules":[{"name":"a","route":"/","limits":["1 per 1m"],"count":{"status":">=400","charge":"first"}}]}`))
	require.NoError(t, err)
	a, _ := s.Rule("a")
	assert.Equal(t, &rules.Count{AtLeast: 400, ChargeFirst: true}, a.Count)
}

// TestLiveTiersReload: every limiter of a rule reaches the build
// function; a reload that changes one tier's limit rebuilds that tier's
// limiter only.
func TestLiveTiersReload(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	s, err := rules.Parse([]byte(plansYAML))
	require.NoError(t, err)
	var got map[string]rules.Limiters
	build := func(r *rules.Rule, ls rules.Limiters) (string, error) {
		got[r.Name] = ls
		return r.Name, nil
	}
	got = map[string]rules.Limiters{}
	live, err := rules.NewLive(store, s, build)
	require.NoError(t, err)
	first := got
	assert.Equal(t, "api/pro", first["api"].Tiers["pro"].Policy().Name)
	assert.Equal(t, int64(50000), first["api"].Overrides["key:k_bigcustomer"].Policy().Limits[0].Requests)
	assert.Equal(t, "login-ip", first["login"].Also[0].Policy().Name)
	assert.Equal(t, "api", first["api"].Default.Policy().Name)

	got = map[string]rules.Limiters{}
	s2, err := rules.Parse([]byte(strings.Replace(plansYAML, `pro: ["1000 per 1m"]`, `pro: ["2000 per 1m"]`, 1)))
	require.NoError(t, err)
	ch, err := live.Swap(s2)
	require.NoError(t, err)
	require.Len(t, ch.LimitsChanged, 1)
	assert.Equal(t, "api/pro", ch.LimitsChanged[0].Name)
	assert.Empty(t, ch.Updated, "a tier's limits are the tier's policy's change")
	assert.Equal(t, 2, ch.Unchanged, "the two rules")
	assert.Equal(t, int64(2000), got["api"].Tiers["pro"].Policy().Limits[0].Requests)
	assert.Same(t, first["api"].Tiers["free"], got["api"].Tiers["free"], "an unchanged tier keeps its limiter")
	assert.Same(t, first["api"].Default, got["api"].Default)
	snap := live.Acquire()
	defer snap.Release()
	r, _ := snap.Set().Rule("api")
	assert.Same(t, got["api"].Tiers["pro"], snap.RuleLimiters(r).Tiers["pro"])
	other, _ := s.Rule("api")
	assert.Nil(t, snap.RuleLimiters(other).Default, "a rule of another set")
}

// TestAlsoCapIsExact: a rule may have exactly maxAlso also: checks; one
// more is refused, naming the cap.
func TestAlsoCapIsExact(t *testing.T) {
	rule := func(n int) string {
		var b strings.Builder
		b.WriteString("rules:\n  - name: api\n    route: /v1/*\n    limits: [\"1 per 1m\"]\n    also:\n")
		for i := range n {
			fmt.Fprintf(&b, "      - {name: also-%d, key: ip, limits: [\"1 per 1m\"]}\n", i)
		}
		return b.String()
	}
	s, err := rules.Parse([]byte(rule(rules.MaxAlso)))
	require.NoError(t, err, "maxAlso checks are allowed")
	api, _ := s.Rule("api")
	assert.Len(t, api.Also, rules.MaxAlso)
	_, err = rules.Parse([]byte(rule(rules.MaxAlso + 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d checks, at most %d", rules.MaxAlso+1, rules.MaxAlso))
}

// TestCountChargeRoundTrips: encoding a rule keeps its count: charge
// (first stays first, after stays the default) and reset_on, in YAML
// and in JSON.
func TestCountChargeRoundTrips(t *testing.T) {
	for _, charge := range []string{"first", "after"} {
		src := `{"rules":[{"name":"a","route":"/","limits":["1 per 1m"],"count":{"status":[401],"reset_on":"success","charge":"` + charge + `"}}]}`
		s, err := rules.Parse([]byte(src))
		require.NoError(t, err)
		want := &rules.Count{Statuses: []int{401}, ResetOnSuccess: true, ChargeFirst: charge == "first"}
		a, _ := s.Rule("a")
		require.Equal(t, want, a.Count, charge)
		for _, encode := range []func() ([]byte, error){func() ([]byte, error) { return rules.EncodeYAML(s) }, func() ([]byte, error) { return rules.EncodeJSON(s) }} {
			b, err := encode()
			require.NoError(t, err)
			again, err := rules.Parse(b)
			require.NoError(t, err, "%s", b)
			a, _ := again.Rule("a")
			assert.Equal(t, want, a.Count, "charge %s through\n%s", charge, b)
		}
	}
}

// TestSwapKeyOnlyChangeIsAnUpdate: a reload that changes only a rule's
// key: is an update of the rule (not "unchanged", not an empty change),
// and the new snapshot's rule keys requests by the new key.
func TestSwapKeyOnlyChangeIsAnUpdate(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	const v1 = "rules:\n  - {name: api, route: /v1/*, key: ip, limits: [\"5 per 1m\"]}\n  - {name: other, route: /o, limits: [\"5 per 1m\"]}\n"
	v2 := strings.Replace(v1, "key: ip", "key: \"header:X-Tenant\"", 1)
	s1, err := rules.Parse([]byte(v1))
	require.NoError(t, err)
	live, err := rules.NewLive[struct{}](store, s1, nil)
	require.NoError(t, err)
	s2, err := rules.Parse([]byte(v2))
	require.NoError(t, err)
	ch, err := live.Swap(s2)
	require.NoError(t, err)
	assert.Equal(t, []string{"api"}, ch.Updated)
	assert.Equal(t, 1, ch.Unchanged, "other")
	assert.NotEqual(t, 0, len(ch.Added)+len(ch.Removed)+len(ch.LimitsChanged)+len(ch.Updated))
	snap := live.Acquire()
	defer snap.Release()
	r := snap.Set().Match("GET", "/v1/items", false)
	require.NotNil(t, r)
	assert.Equal(t, rules.Key{Kind: "header", Header: "X-Tenant"}, r.Key)
}
