package serve_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

// TestAdminPerLimit (issue 37): the admin GET gives every limit of a
// rule of two limits its own figures (per_limit: limit, window, used,
// remaining, reset in epoch seconds, retry after), not only the binding
// one's; on every store, the fleet tier included, and under GCRA and the
// sliding log (which the Redis store reads in Go). The store deadline is
// one a loaded host cannot miss (a decision failed open would change the
// counts).
func TestAdminPerLimit(t *testing.T) {
	for _, algo := range []string{"gcra", "sliding_log"} {
		for name, newStore := range adminStores(t) {
			t.Run(algo+"/"+name, func(t *testing.T) {
				yaml := `
rules:
  - name: burst
    route: /v2/*
    identity: authenticated
    key: user
    algorithm: ` + algo + `
    limits: ["3 per 1m", "5 per 1h"]
`
				set, err := rules.Parse([]byte(yaml))
				require.NoError(t, err)
				start := time.Unix(1_700_000_000, 0)
				clock := core.NewManualClock(start)
				mux := http.NewServeMux()
				mux.HandleFunc("GET /v2/items", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
				srv, limited, err := serve.NewNetHTTP(serve.Config{Store: newStore(t), Identity: identity(t), LimiterOptions: []core.Option{core.WithClock(clock), core.WithTimeout(redistest.StoreTimeout)}}, set, mux)
				require.NoError(t, err)
				admin, err := srv.AdminHandler(serve.AdminConfig{Authorize: serve.BearerToken("T")})
				require.NoError(t, err)
				get := func() (serve.PolicyUsage, map[string]any) {
					t.Helper()
					w := adminDo(admin, "GET", serve.AdminPath+"burst/bob", "T")
					require.Equal(t, http.StatusOK, w.Code, w.Body.String())
					var u serve.RuleUsage
					require.NoError(t, json.Unmarshal(w.Body.Bytes(), &u))
					require.Len(t, u.Policies, 1)
					var raw struct{ Policies []map[string]any }
					require.NoError(t, json.Unmarshal(w.Body.Bytes(), &raw))
					return u.Policies[0], raw.Policies[0]
				}
				for i := range 3 {
					require.Equal(t, 200, send(limited, "GET", "/v2/items", "", "X-User", "bob"), "request %d", i+1)
				}
				p, raw := get()
				// 3 per minute is spent (back in a minute; the next request
				// in 20 s under GCRA, in 60 s under the log); 5 per hour
				// has 2 left (full again in 36 minutes under GCRA, in an
				// hour under the log)
				retry1, reset2 := 20.0, start.Add(36*time.Minute).Unix()
				if algo == "sliding_log" {
					retry1, reset2 = 60, start.Add(time.Hour).Unix()
				}
				assert.Equal(t, []serve.LimitUsage{
					{Limit: 3, Window: 60, Used: 3, Remaining: 0, Reset: start.Add(time.Minute).Unix(), RetryAfter: retry1},
					{Limit: 5, Window: 3600, Used: 3, Remaining: 2, Reset: reset2, RetryAfter: 0},
				}, p.PerLimit)
				assert.Equal(t, []int64{3, 0}, []int64{p.Limit, p.Remaining}, "the binding limit: 3 per minute")
				// the JSON names, as docs/operations.md documents them
				pl, _ := raw["per_limit"].([]any)
				require.Len(t, pl, 2, "per_limit in %v", raw)
				keys := []string{}
				for k := range pl[1].(map[string]any) {
					keys = append(keys, k)
				}
				assert.ElementsMatch(t, []string{"limit", "window_seconds", "used", "remaining", "reset", "retry_after_seconds"}, keys)

				// a minute on, 2 more: the hour's limit binds and is spent,
				// the minute's has 1 left
				clock.Advance(61 * time.Second)
				for i := range 2 {
					require.Equal(t, 200, send(limited, "GET", "/v2/items", "", "X-User", "bob"), "request %d after a minute", i+1)
				}
				assert.Equal(t, 429, send(limited, "GET", "/v2/items", "", "X-User", "bob"))
				p, _ = get()
				now := start.Add(61 * time.Second)
				require.Len(t, p.PerLimit, 2)
				assert.Equal(t, []int64{3, 2, 1}, []int64{p.PerLimit[0].Limit, p.PerLimit[0].Used, p.PerLimit[0].Remaining}, "the minute's limit: %+v", p.PerLimit[0])
				assert.Equal(t, []int64{5, 5, 0}, []int64{p.PerLimit[1].Limit, p.PerLimit[1].Used, p.PerLimit[1].Remaining}, "the hour's limit: %+v", p.PerLimit[1])
				assert.Greater(t, p.PerLimit[1].RetryAfter, 0.0)
				assert.Greater(t, p.PerLimit[1].Reset, now.Unix())
				assert.Zero(t, p.PerLimit[0].RetryAfter)
				assert.Equal(t, []int64{5, 0}, []int64{p.Limit, p.Remaining}, "the binding limit: 5 per hour")

				// the DELETE forgets both
				require.Equal(t, http.StatusNoContent, adminDo(admin, "DELETE", serve.AdminPath+"burst/bob", "T").Code)
				p, _ = get()
				assert.Equal(t, []serve.LimitUsage{
					{Limit: 3, Window: 60, Used: 0, Remaining: 3, Reset: now.Unix(), RetryAfter: 0},
					{Limit: 5, Window: 3600, Used: 0, Remaining: 5, Reset: now.Unix(), RetryAfter: 0},
				}, p.PerLimit)
			})
		}
	}
}
