package exampleapp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

func login(t *testing.T, h http.Handler, ip, user, password string) int {
	t.Helper()
	body := url.Values{"username": {user}, "password": {password}}.Encode()
	r := httptest.NewRequest(http.MethodPost, LoginPath, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = ip + ":40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code == http.StatusOK {
		assert.Contains(t, w.Body.String(), fmt.Sprintf("%q", user), "the handler read the form after the key function did")
	}
	return w.Code
}

// TestLoginThrottling is the default rules' login rule from outside:
// only failures count, per username (10 per 15m) and per IP (100 per
// 15m), and a success clears the username's count.
func TestLoginThrottling(t *testing.T) {
	app, err := New(Config{JWTSecret: "test-secret-test-secret"}, WithClock(core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))))
	require.NoError(t, err)
	defer app.Close()
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	const ip = "203.0.113.7"
	var codes []int
	for range 12 {
		codes = append(codes, login(t, h, ip, "alice", "wrong"))
	}
	assert.Equal(t, []int{401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 429, 429}, codes, "12 failed logins for one username")
	assert.Equal(t, 429, login(t, h, ip, "alice", DemoPassword), "alice is locked out, even with her password")
	assert.Equal(t, 200, login(t, h, ip, "bob", DemoPassword), "a correct password on another username works")

	// a success clears the username's failures
	for range 9 {
		require.Equal(t, 401, login(t, h, ip, "carol", "wrong"))
	}
	require.Equal(t, 200, login(t, h, ip, "carol", DemoPassword))
	for i := range 10 {
		require.Equal(t, 401, login(t, h, ip, "carol", "wrong"), "failure %d after the success", i+1)
	}
	assert.Equal(t, 429, login(t, h, ip, "carol", "wrong"))

	// the per-IP limit: 100 failures from one IP, over any usernames
	const ip2 = "198.51.100.9"
	for i := range 100 {
		require.Equal(t, 401, login(t, h, ip2, fmt.Sprintf("user%d", i), "wrong"))
	}
	assert.Equal(t, 429, login(t, h, ip2, "someone-else", "wrong"))
	assert.Equal(t, 200, login(t, h, ip, "dave", DemoPassword), "another IP is not affected")
}

// plansRules is the plans recipe of docs/policies.md with small limits.
const plansRules = `
rules:
  - name: api
    route: /v1/*
    identity: authenticated
    key: user
    tier: claim:plan
    tiers: {free: ["3 per 1m"], pro: ["5 per 1m"], default: ["2 per 1m"]}
    overrides: {"key:k_bigcustomer": ["7 per 1m"], "user:vip": ["9 per 1m"]}
`

// TestPlansThroughHTTP: free, pro, no plan, an unknown plan and the
// overridden clients each get exactly their own quota; a reload that
// changes a tier's limit is served.
func TestPlansThroughHTTP(t *testing.T) {
	app, srv, h, file, _ := reloadApp(t, plansRules, Config{JWTSecret: "test-secret-test-secret", APIKeys: []string{"k_bigcustomer", "k_small"}})
	token := func(sub, plan string) map[string]string {
		claims := map[string]any{}
		if plan != "" {
			claims["plan"] = plan
		}
		tok, err := app.TokenWithClaims(sub, time.Hour, claims)
		require.NoError(t, err)
		return map[string]string{"Authorization": "Bearer " + tok}
	}
	quota := func(hdr map[string]string) int {
		n, w := client{t: t, h: h, ip: "203.0.113.7", hdr: hdr}.sendUntilDenied("GET", PlansPath, 100)
		require.NotNil(t, w)
		return n
	}
	assert.Equal(t, 3, quota(token("u-free", "free")))
	assert.Equal(t, 5, quota(token("u-pro", "pro")))
	assert.Equal(t, 2, quota(token("u-none", "")), "no plan: the default")
	assert.Equal(t, 2, quota(token("u-gold", "gold")), "an unknown plan: the default")
	assert.Equal(t, 5, quota(token("u-free", "pro")), "u-free upgraded: a fresh pro quota")
	assert.Equal(t, 9, quota(token("vip", "free")), "an overridden user")
	assert.Equal(t, 7, quota(map[string]string{"X-API-Key": "k_bigcustomer"}), "an overridden API key")
	assert.Equal(t, 2, quota(map[string]string{"X-API-Key": "k_small"}), "another API key: the default")

	writeRules(t, file, strings.Replace(plansRules, `pro: ["5 per 1m"]`, `pro: ["8 per 1m"]`, 1))
	ch, err := app.ReloadRules(srv.Live())
	require.NoError(t, err)
	require.Len(t, ch.LimitsChanged, 1)
	assert.Equal(t, "api/pro", ch.LimitsChanged[0].Name)
	assert.Equal(t, 8, quota(token("u-pro2", "pro")), "the reloaded pro limit")
	assert.Equal(t, 0, quota(token("u-free", "free")), "an unchanged tier keeps its state")
}

// TestAddedPoliciesWatched: the tiers' configured limits are exported
// like the rules' own, and a reload exports the new ones.
func TestAddedPoliciesWatched(t *testing.T) {
	app, srv, _, file, _ := reloadApp(t, plansRules, Config{JWTSecret: "test-secret-test-secret"})
	scrape := func() string {
		w := httptest.NewRecorder()
		app.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", MetricsPath, nil))
		return w.Body.String()
	}
	out := scrape()
	assert.Contains(t, out, `limitkit_limit_requests{limit="0",policy="api",window="60"} 2`, "the rule's own (its default tier)")
	assert.Contains(t, out, `limitkit_limit_requests{limit="0",policy="api/pro",window="60"} 5`)
	assert.Contains(t, out, `window="60"} 9`, "an override's")

	writeRules(t, file, strings.Replace(plansRules, `pro: ["5 per 1m"]`, `pro: ["8 per 1m"]`, 1))
	_, err := app.ReloadRules(srv.Live())
	require.NoError(t, err)
	assert.Contains(t, scrape(), `limitkit_limit_requests{limit="0",policy="api/pro",window="60"} 8`)
}
