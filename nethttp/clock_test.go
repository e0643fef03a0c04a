package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/nethttp"
)

// TestEpochResetFollowsLimiterClock: without WithClock, X-RateLimit-Reset is
// computed from the same instant the limiter decided at (its clock).
func TestEpochResetFollowsLimiterClock(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Unix(2_000_000_000, 0))
	lim := core.MustNewLimiter(store, core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(5)}}, core.WithClock(clock))
	h := nethttp.New(lim)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/x", nil)
	h.ServeHTTP(rec, req)
	require.Equal(t, 200, rec.Code)
	// 2,000,000,000 is 20 s into its minute: the window ends 40 s later
	assert.Equal(t, strconv.Itoa(2_000_000_040), rec.Header().Get("X-RateLimit-Reset"))
	assert.Equal(t, "4", rec.Header().Get("X-RateLimit-Remaining"))
}
