package serve_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

// TestLoginRecipeExact (issue 37): the login recipe (rules/default.yaml's
// login rule, docs/policies.md) says 10 failed logins per 15 minutes;
// under the default GCRA a guesser got 19 in 15 minutes. Its sliding log
// admits at most 10 failures in any 15-minute span: one guess a second
// for 45 minutes, through the rule's middleware, at a manual clock. The
// same drive under GCRA finds 19, so the count has the power to tell.
func TestLoginRecipeExact(t *testing.T) {
	def, ok := rules.Default().Rule("login")
	require.True(t, ok)
	assert.Equal(t, core.SlidingWindowLog, def.Algorithm, "the login recipe's algorithm")
	assert.Equal(t, []core.Limit{core.Per(10, 15*time.Minute)}, def.Limits)
	yaml, err := os.ReadFile("../default.yaml") // rules.Default()'s text
	require.NoError(t, err)
	for alg, want := range map[string]int{"sliding_log": 10, "gcra": 19} {
		t.Run(alg, func(t *testing.T) {
			set, err := rules.Parse([]byte(strings.Replace(string(yaml), "algorithm: sliding_log", "algorithm: "+alg, 1)))
			require.NoError(t, err)
			r, _ := set.Rule("login")
			require.Equal(t, alg, r.Algorithm.String())
			store := memstore.MustNew()
			defer store.Close()
			clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
			mux := http.NewServeMux()
			mux.HandleFunc("POST /login", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
			id := identity(t)
			id.Claim = func(name string) (keyfuncs.Func, error) { return keyfuncs.Header("X-" + name) } // the default rules' plans tier
			id.Override = func(*rules.Rule, string) (string, error) { return "~unused", nil }
			_, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: id, LimiterOptions: []core.Option{core.WithClock(clock)}}, set, mux)
			require.NoError(t, err)
			var failed []time.Time // the guesses that reached the password check
			for range 45 * 60 {
				if send(h, "POST", "/login", loginForm("alice", "guess")) == http.StatusUnauthorized {
					failed = append(failed, clock.Now())
				}
				clock.Advance(time.Second)
			}
			most := 0
			for i := range failed {
				n := 0
				for _, f := range failed[i:] {
					if f.Sub(failed[i]) < 15*time.Minute {
						n++
					}
				}
				most = max(most, n)
			}
			assert.Equal(t, want, most, "most guesses in a 15-minute span")
		})
	}
}
