package adaptertest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

func init() { scenarios = append(scenarios, sourceScenarios...) }

// sourceScenarios are issue 36's limits from the application's data
// (httplimit.WithLimitSource): every adapter decides a client by the
// limits its source has for it, the headers and the denial describing
// them.
var sourceScenarios = []scenario{
	{"LimitSource", func(t *testing.T, h Harness, env *Env) {
		user, err := keyfuncs.Header("X-User")
		if err != nil {
			t.Fatal(err)
		}
		def := env.Limiter(t, policy("api", core.PerMinute(2)))
		rows := map[string]int64{"acme": 3}
		src, err := core.NewSourced(def, func(_ context.Context, id string) ([]core.Limit, bool, error) {
			n, ok := rows[id] // read only: the map is not written after this point
			if !ok {
				return nil, false, nil
			}
			return []core.Limit{core.PerMinute(n)}, true, nil
		}, core.SourceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		acmePolicy := src.Select(context.Background(), "acme").Policy().Name
		c := build(t, h, App{
			Global: mw(def, httplimit.WithClock(env.Clock), httplimit.WithKey(user), httplimit.WithLimitSource(src)),
			Routes: []Route{{Method: "GET", Path: "/v1/x"}},
		})
		scope := h.Scope("GET", "/v1/x")
		var steps []Step
		quota := func(pol string, limit int64, userKey string) {
			k := pol + "#" + scope + "|" + userKey
			for i := int64(1); i <= limit; i++ {
				steps = append(steps, Step{Req: get("/v1/x", Peer1, "X-User", userKey), Status: 200,
					Header: XRL(limit, limit-i, time.Duration(i)*time.Minute/time.Duration(limit)), Keys: []string{k}})
			}
			steps = append(steps, Step{Req: get("/v1/x", Peer1, "X-User", userKey), Status: 429, Problem: pol,
				Header: XRL(limit, 0, time.Minute).With("Retry-After", strconv.FormatInt(int64(60/limit), 10)), Keys: []string{k}})
		}
		quota(acmePolicy, 3, "acme") // the source's limits
		quota("api", 2, "globex")    // not found: the rule's own
		Play(t, env, c, steps)
	}},
}
