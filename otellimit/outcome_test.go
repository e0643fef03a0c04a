package otellimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/otellimit"
)

// Issue 37: a brute force against a login counted by outcome is visible
// in OTel too: 10 failed logins (each peek an allowed decision) and 5
// denials make limitkit.decisions read exactly 10 allowed and 5 denied.
func TestOutcomeDecisionsAreCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	o, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	ms := memstore.MustNew()
	defer ms.Close()
	l := core.MustNewLimiter(ms, core.Policy{Name: "login", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(10, 15*time.Minute)}},
		core.WithObserver(o), core.WithClock(core.NewManualClock(time.Unix(1_700_000_000, 0))))
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
	assert.Equal(t, map[string]float64{
		"limitkit.policy=login,limitkit.result=allowed,": 10,
		"limitkit.policy=login,limitkit.result=denied,":  5,
	}, points(t, reader)["limitkit.decisions"])
}
