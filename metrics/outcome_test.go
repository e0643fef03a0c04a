package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/nethttp"
)

// Issue 37: a brute force against a login counted by outcome is visible.
// 10 failed logins reach the handler (each one an allowed decision, its
// peek) and 5 more are denied before it (denied decisions);
// limitkit_decisions_total reads exactly 10 and 5. The charges after the
// 401s are not decisions.
func TestOutcomeDecisionsAreCounted(t *testing.T) {
	m, reg := newRegistry(t)
	ms := memstore.MustNew()
	defer ms.Close()
	l := core.MustNewLimiter(ms, core.Policy{Name: "login", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(10, 15*time.Minute)}},
		core.WithObserver(m), core.WithClock(core.NewManualClock(time.Unix(1_700_000_000, 0))))
	h := nethttp.New(l, httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ResetOnSuccess: true}))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	codes := map[int]int{}
	for range 15 {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = "203.0.113.7:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes[w.Code]++
	}
	require.Equal(t, map[int]int{401: 10, 429: 5}, codes)
	require.Equal(t, 10.0, gauge(t, reg, "limitkit_decisions_total", map[string]string{"policy": "login", "outcome": "allowed"}))
	require.Equal(t, 5.0, gauge(t, reg, "limitkit_decisions_total", map[string]string{"policy": "login", "outcome": "denied"}))
	require.Equal(t, 0.0, gauge(t, reg, "limitkit_decisions_total", map[string]string{"policy": "login", "outcome": "degraded"}))
}
