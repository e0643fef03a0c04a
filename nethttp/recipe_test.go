package nethttp_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// TestHybridRecipe (issue 37): docs/recipes.md's "the user's quota and
// the IP's quota" states its numbers: a user is held to 200 a minute and
// every IP to 50, both at once; an anonymous client meets the IP check
// alone. A user behind one IP gets 50 (the IP binds), the same user spread
// over 5 IPs gets 200 (the user binds), an anonymous client 50. (The
// recipe keys users by a verified JWT; a header stands in for it here.)
func TestHybridRecipe(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	jwtKey, err := keyfuncs.Header("X-User")
	require.NoError(t, err)
	userLimiter := core.MustNewLimiter(store, core.Policy{Name: "user", Limits: []core.Limit{core.PerMinute(200)}}, core.WithClock(clock))
	ipLimiter := core.MustNewLimiter(store, core.Policy{Name: "ip", Limits: []core.Limit{core.PerMinute(50)}}, core.WithClock(clock))
	hybrid := nethttp.New(userLimiter,
		httplimit.WithKey(jwtKey), httplimit.WithNoKeySkip(),
		httplimit.WithCheck(ipLimiter, nil))
	mux := http.NewServeMux()
	mux.Handle("POST /orders", hybrid(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	admitted := func(user string, ips ...string) int {
		n := 0
		for i := range 1000 {
			r := httptest.NewRequest("POST", "/orders", nil)
			r.RemoteAddr = ips[i%len(ips)] + ":4000"
			if user != "" {
				r.Header.Set("X-User", user)
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code == http.StatusOK {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 50, admitted("alice", "198.51.100.1"), "one IP: the IP's 50")
	assert.Equal(t, 200, admitted("bob", "198.51.100.2", "198.51.100.3", "198.51.100.4", "198.51.100.5", "198.51.100.6"), "five IPs: the user's 200")
	assert.Equal(t, 50, admitted("", "198.51.100.7"), "anonymous: the IP check alone")
}
