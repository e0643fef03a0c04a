package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/nethttp"
)

// loginServer counts failed logins (401, 2 a minute) with reset on
// success around h, and serves one request, returning its recorder.
func loginServer(t *testing.T, h http.HandlerFunc) func() *httptest.ResponseRecorder {
	t.Helper()
	ms := memstore.MustNew()
	t.Cleanup(func() { _ = ms.Close() })
	l := core.MustNewLimiter(ms, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(2)}})
	srv := nethttp.New(l, httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ResetOnSuccess: true}))(h)
	return func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = "203.0.113.7:1"
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
}

// An informational status (103 Early Hints) is not the response's
// status: the final one written after it is what counts. (The recorder
// keeps 103 as its Code; the third request shows what was charged.)
func TestOutcomeInformationalStatusIsNotTheStatus(t *testing.T) {
	serve := loginServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusUnauthorized)
	})
	serve()
	assert.Equal(t, "0", serve().Header().Get("X-Ratelimit-Remaining"), "the first 103-then-401 was charged")
	assert.Equal(t, http.StatusTooManyRequests, serve().Code, "two failed logins charged: the third is denied")
}

// A handler that flushes before writing a status has sent 200 (net/http
// writes it on the flush): a success, which resets the count, not a
// response with no status (a counted failure).
func TestOutcomeFlushBeforeStatusIs200(t *testing.T) {
	fail := true
	serve := loginServer(t, func(w http.ResponseWriter, _ *http.Request) {
		if fail {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		require.NoError(t, http.NewResponseController(w).Flush())
	})
	assert.Equal(t, 401, serve().Code)
	fail = false
	w := serve()
	assert.Equal(t, 200, w.Code)
	assert.Equal(t, "0", w.Header().Get("X-Ratelimit-Remaining"), "the 401 was charged")
	w = serve()
	assert.Equal(t, 200, w.Code)
	assert.Equal(t, "1", w.Header().Get("X-Ratelimit-Remaining"), "the flushed response was a success: the count was reset")
}

// 101 Switching Protocols is a final status (net/http sends no other
// after it; a websocket library writes it, then hijacks): the upgrade is
// a success that Count decides, not a response with no status (a counted
// failure charged on every upgrade).
func TestOutcomeSwitchingProtocolsIsAStatus(t *testing.T) {
	serve := loginServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Upgrade", "websocket")
		w.WriteHeader(http.StatusSwitchingProtocols)
	})
	for i := 0; i < 3; i++ {
		w := serve()
		require.Equal(t, http.StatusSwitchingProtocols, w.Code, "upgrade %d: admitted", i+1)
		assert.Equal(t, "1", w.Header().Get("X-Ratelimit-Remaining"), "upgrade %d: no upgrade before it was charged", i+1)
	}
}
