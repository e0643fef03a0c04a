package httplimit

import (
	"context"
	"math"
	"math/rand"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit/internal/respond"
)

// TestSetHTTPMatchesFields: Engine.SetHTTP writes exactly what Fields and
// respond.SetHTTP write, for passes and denials, every header set, both
// reset formats, degraded decisions, small and large counts, and limits
// the engine has no text for.
func TestSetHTTPMatchesFields(t *testing.T) {
	st := memstore.MustNew()
	defer st.Close()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 300_000_000))
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(100), core.PerHour(5000)}})
	rng := rand.New(rand.NewSource(7))
	counts := []int64{0, 1, 99, 1023, 1024, 5000, 999_999, 1 << 40, 1e16 - 1, 1e16, math.MaxInt64, -1}
	durs := []time.Duration{0, time.Millisecond, 1500 * time.Millisecond, time.Minute, 90 * time.Minute, core.Never}
	for _, hs := range []HeaderSet{HeaderDefault, HeaderXRateLimit, HeaderXRateLimit | HeaderIETF, HeaderIETF, HeaderNone, HeaderRetryAfter} {
		for _, delta := range []bool{false, true} {
			for _, withClock := range []bool{false, true} {
				opts := []Option{WithHeaders(hs), WithDegradedHeader("X-Degraded")}
				if delta {
					opts = append(opts, WithResetDelta())
				}
				if withClock {
					opts = append(opts, WithClock(clk))
				}
				e, err := newEngineNamed("x", lim, opts...)
				require.NoError(t, err)
				for i := 0; i < 300; i++ {
					res := Result{
						Action:  Action(rng.Intn(2)), // Pass or Deny
						decided: rng.Intn(8) != 0,
						Decision: core.Decision{
							Policy:     "p",
							Limit:      []core.Limit{core.PerMinute(100), core.PerHour(5000), core.PerMinute(7), {}}[rng.Intn(4)],
							Remaining:  counts[rng.Intn(len(counts))],
							ResetAfter: durs[rng.Intn(len(durs))],
							RetryAfter: durs[rng.Intn(len(durs))],
						},
						Degraded: rng.Intn(4) == 0,
					}
					if res.Action == Deny {
						res.Reason = []Reason{ReasonLimited, ReasonUnavailable, ReasonNoKey}[rng.Intn(3)]
					}
					if rng.Intn(2) == 0 {
						res.now = time.Unix(1_700_000_000+int64(rng.Intn(5)), int64(rng.Intn(1e9)))
					}
					want, got := http.Header{"Other": {"x"}}, http.Header{"Other": {"x"}}
					var f Fields
					e.Fields(&res, &f)
					respond.SetHTTP(want, &f.f)
					e.SetHTTP(&res, got)
					require.Equal(t, want, got, "headers %v delta %v: %+v", hs, delta, res)
				}
			}
		}
	}
}

// TestEngineSetHTTPAllocs: the common response's headers cost one allocation
// through the engine (respond's own TestSetHTTPAllocs counts SetHTTP alone).
func TestEngineSetHTTPAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	st := memstore.MustNew()
	defer st.Close()
	lim := core.MustNewLimiter(st, core.Policy{Name: "p", Limits: []core.Limit{core.Per(1_000_000_000, time.Hour)}})
	e, err := newEngineNamed("x", lim)
	require.NoError(t, err)
	res := decide(e, context.Background(), httpReq("GET", "/a", "203.0.113.7:1"))
	require.Equal(t, Pass, res.Action)
	h := http.Header{}
	e.SetHTTP(&res, h)
	assert.Len(t, h, 3)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { clear(h); e.SetHTTP(&res, h) }))
}
