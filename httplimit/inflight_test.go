package httplimit

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// concEngine is an engine with a rate limit of rate per hour and a
// concurrency limit of 1, on an adapter that reports outcomes.
func concEngine(t *testing.T, rate int64) (*Engine, *core.Concurrency) {
	t.Helper()
	store := memstore.MustNew()
	t.Cleanup(func() { _ = store.Close() })
	l := core.MustNewLimiter(store, core.Policy{Name: "exports", Limits: []core.Limit{core.PerHour(rate)}})
	c, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "exports", Max: 1})
	require.NoError(t, err)
	e, err := NewAdapterEngine(counting, l, WithConcurrency(c))
	require.NoError(t, err)
	require.True(t, e.CountsOutcome())
	return e, c
}

func decideExport(e *Engine) Result {
	r, _ := http.NewRequest("GET", "http://example.com/export", nil)
	r.Pattern, r.RemoteAddr = "GET /export", "203.0.113.7:1"
	return decide(e, context.Background(), httpView{r})
}

// TestConcurrencyHeldUntilOutcome: the slot is held from Decide until
// Outcome (which every adapter calls when the handler returned, panicked
// or its client left), and a second Outcome releases nothing more.
func TestConcurrencyHeldUntilOutcome(t *testing.T) {
	e, _ := concEngine(t, 100)
	res := decideExport(e)
	require.Equal(t, Pass, res.Action)
	denied := decideExport(e)
	require.Equal(t, Deny, denied.Action)
	assert.Equal(t, ReasonLimited, denied.Reason)
	rej := e.Reject(&denied)
	assert.Equal(t, http.StatusTooManyRequests, rej.Status)
	assert.Equal(t, int64(1), rej.RetryAfter)
	e.Outcome(context.Background(), &res, OutcomePanic)
	again := decideExport(e)
	require.Equal(t, Pass, again.Action, "Outcome did not give the slot back")
	e.Outcome(context.Background(), &res, 200) // settles nothing
	require.Equal(t, Deny, decideExport(e).Action, "a second Outcome released another request's slot")
	e.Outcome(context.Background(), &again, 200)
}

// TestConcurrencyRateDenialHoldsNothing: a request the rate limit denies
// gives its slot back at once.
func TestConcurrencyRateDenialHoldsNothing(t *testing.T) {
	e, c := concEngine(t, 1)
	res := decideExport(e)
	require.Equal(t, Pass, res.Action)
	e.Outcome(context.Background(), &res, 200)
	require.Equal(t, Deny, decideExport(e).Action) // the rate's
	rel, d, err := c.Acquire(context.Background(), "GET /export|203.0.113.7")
	require.NoError(t, err)
	require.True(t, d.Allowed, "a rate denial kept its slot")
	rel.Release()
}

// TestWithConcurrencyNil and an adapter that reports no outcome are
// errors at construction.
func TestWithConcurrencyErrors(t *testing.T) {
	l := core.MustNewLimiter(memstore.MustNew(), core.Policy{Name: "x", Limits: []core.Limit{core.PerHour(1)}})
	_, err := NewAdapterEngine(counting, l, WithConcurrency(nil))
	assert.ErrorContains(t, err, "WithConcurrency(nil)")
	c, err := core.NewConcurrency(memstore.MustNew(), core.ConcurrencyPolicy{Name: "x", Max: 1})
	require.NoError(t, err)
	_, err = NewAdapterEngine(Adapter{Name: "n"}, l, WithConcurrency(c))
	assert.ErrorContains(t, err, "httplimit.WithConcurrency holds a slot until the handler returns")
}
