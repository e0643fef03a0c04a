package adaptertest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
)

// TestInFlightAroundTheChain: on every adapter, a global middleware with
// WithInFlight counts each request from before its decision until the
// rest of the chain has returned, and lets it go after. The route's own
// middleware, inside the chain, is elastic (a limit of 1, a ceiling of
// 300%) on the load signal over the same counter: with Max 1 it sees one
// request in flight (this one) and admits up to the ceiling; with Max 0
// the same count is too much and the route is held to its hard limit.
// Without WithInFlight nothing is counted (Max 0 then has room).
func TestInFlightAroundTheChain(t *testing.T) {
	for _, h := range All() {
		for _, tc := range []struct {
			name  string
			count bool
			max   int64
			want  []int
		}{
			{"counted/max1", true, 1, []int{200, 200, 200, 429}},
			{"counted/max0", true, 0, []int{200, 429, 429, 429}},
			{"uncounted/max0", false, 0, []int{200, 200, 200, 429}},
		} {
			t.Run(h.Name+"/"+tc.name, func(t *testing.T) {
				env := NewEnv(t)
				ms, err := memstore.New(memstore.WithClock(env.Clock))
				require.NoError(t, err)
				t.Cleanup(func() { _ = ms.Close() })
				var inflight core.InFlight
				route, err := core.NewLimiter(ms, core.Policy{Name: "route", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(1)},
					Elastic: &core.Elastic{CeilingPercent: 300, Signal: core.LoadBelow{InFlight: &inflight, Max: tc.max}}}, core.WithClock(env.Clock))
				require.NoError(t, err)
				global := env.Limiter(t, policy("global", core.PerHour(1000)))
				var gopts []httplimit.Option
				if tc.count {
					gopts = append(gopts, httplimit.WithInFlight(&inflight))
				}
				c := build(t, h, App{
					Global: mw(global, gopts...),
					Routes: []Route{{Method: "GET", Path: "/x", Mw: mw(route)}},
				})
				var got []int
				for range tc.want {
					got = append(got, c(get("/x", Peer1)).Status)
					assert.Zero(t, inflight.Load(), "counted out when the request is done")
				}
				assert.Equal(t, tc.want, got)
			})
		}
	}
}

func TestWithInFlightNil(t *testing.T) {
	env := NewEnv(t)
	for _, h := range All() {
		_, err := h.Build(App{Global: mw(env.Limiter(t, policy("p", core.PerHour(1))), httplimit.WithInFlight(nil))})
		require.Error(t, err, h.Name)
		assert.Contains(t, err.Error(), "WithInFlight(nil)")
	}
}
