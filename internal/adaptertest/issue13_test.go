package adaptertest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// TestIssue13GlobalMiddlewarePerRoute is issue 13's walk-through on every
// adapter: after 110 requests to GET /users/x on a 100-per-minute global
// limiter, GET /other answers 404 with X-RateLimit-Remaining: 99 (fiber
// answered 429 with Remaining 0: its app.Use put every route in one
// quota).
func TestIssue13GlobalMiddlewarePerRoute(t *testing.T) {
	for _, h := range All() {
		t.Run(h.Name, func(t *testing.T) {
			env := NewEnv(t)
			l := env.Limiter(t, policy("api", core.PerMinute(100)))
			c := build(t, h, App{
				Global: mw(l, httplimit.WithClock(env.Clock)),
				Routes: []Route{{Method: "GET", Path: "/users/:id"}},
			})
			statuses := map[int]int{}
			for i := 0; i < 110; i++ {
				statuses[c(get("/users/x", Peer1)).Status]++
			}
			assert.Equal(t, map[int]int{200: 100, 429: 10}, statuses)
			resp := c(get("/other", Peer1))
			require.Equal(t, 404, resp.Status)
			assert.Equal(t, "99", resp.Header.Get("X-Ratelimit-Remaining"))
		})
	}
}
