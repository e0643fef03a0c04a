package httplimit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
)

// takeOnly is a core.Store without the quota verbs.
type takeOnly struct{ core.Store }

func TestPoliciesConfigErrors(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	lim := func(st core.Store, name string) *core.Limiter {
		return core.MustNewLimiter(st, core.Policy{Name: name, Limits: []core.Limit{core.PerMinute(1)}})
	}
	plan, _ := keyfuncs.Header("X-Plan")
	def := lim(ms, "api")
	_, err := newEngineNamed("x", def, WithTiers(plan, map[string]*core.Limiter{"pro": def}))
	assert.ErrorContains(t, err, "x: core: NewTiers: tier \"pro\" and the default share the policy name \"api\"")
	_, err = newEngineNamed("x", def, WithTiers(nil, nil))
	assert.ErrorContains(t, err, "WithTiers(nil")
	_, err = NewAdapterEngine(counting, lim(takeOnly{ms}, "t"), WithOutcome(Outcome{Count: StatusIn(401)}))
	assert.ErrorContains(t, err, "does not implement the quota verbs")
	_, err = NewAdapterEngine(counting, def, WithOutcome(Outcome{}))
	assert.ErrorContains(t, err, "Outcome.Count is nil")
}

// TestTierHeaders: the IETF policy field, the limit and the denial body
// are the chosen tier's.
func TestTierHeaders(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	plan, _ := keyfuncs.Header("X-Plan")
	free := core.MustNewLimiter(ms, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	pro := core.MustNewLimiter(ms, core.Policy{Name: "api/pro", Limits: []core.Limit{core.PerMinute(7)}})
	e, err := newEngineNamed("x", free, WithHeaders(HeaderDefault|HeaderIETF), WithTiers(plan, map[string]*core.Limiter{"pro": pro}))
	require.NoError(t, err)
	r, _ := http.NewRequest("GET", "http://example.com/x", nil)
	r.Pattern, r.RemoteAddr = "GET /x", "203.0.113.7:1"
	r.Header.Set("X-Plan", "pro")
	res := decide(e, context.Background(), httpView{r})
	h := http.Header{}
	e.SetHTTP(&res, h)
	assert.Equal(t, "7", h.Get("X-Ratelimit-Limit"))
	assert.Equal(t, `"api/pro";q=7;w=60`, h.Get("Ratelimit-Policy"))
	assert.Equal(t, `"api/pro";r=6;t=9`, h.Get("Ratelimit"))
	r.Header.Del("X-Plan")
	decide(e, context.Background(), httpView{r})
	res = decide(e, context.Background(), httpView{r})
	require.Equal(t, Deny, res.Action)
	h = http.Header{}
	e.SetHTTP(&res, h)
	assert.Equal(t, `"api";q=1;w=60`, h.Get("Ratelimit-Policy"))
	assert.Contains(t, string(e.Reject(&res).Body), `"violated-policies":["api"]`)
}

func TestDecideTierAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	ms := memstore.MustNew()
	defer ms.Close()
	plan, _ := keyfuncs.Header("X-Plan")
	big := []core.Limit{core.Per(1<<30, 24*time.Hour)}
	e, err := newEngineNamed("x", core.MustNewLimiter(ms, core.Policy{Name: "a", Limits: big}), WithTiers(plan,
		map[string]*core.Limiter{"pro": core.MustNewLimiter(ms, core.Policy{Name: "a/pro", Limits: big})}))
	require.NoError(t, err)
	r, _ := http.NewRequest("GET", "http://example.com/x", nil)
	r.Pattern, r.RemoteAddr = "GET /a", "203.0.113.7:1"
	r.Header.Set("X-Plan", "pro")
	req := httpView{r}
	ctx := context.Background()
	decide(e, ctx, req)
	assert.Equal(t, 0.0, testing.AllocsPerRun(200, func() {
		res := decide(e, ctx, req)
		var f Fields
		e.Fields(&res, &f)
	}), "a returning client of a tier: no allocation")
}

// TestOverridesMatchOnlyThePrimaryKey: an override applies to the client
// key New's key function returned; a request without one is keyed by
// the fallback key ("~fb/" and the peer IP), which never matches an
// override, even one whose name is that very key.
func TestOverridesMatchOnlyThePrimaryKey(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	apiKey, _ := keyfuncs.Header("X-API-Key")
	lim := func(name string, n int64) *core.Limiter {
		return core.MustNewLimiter(ms, core.Policy{Name: name, Limits: []core.Limit{core.PerMinute(n)}})
	}
	e, err := newEngineNamed("x", lim("api", 1), WithKey(apiKey), WithOverrides(map[string]*core.Limiter{
		"k_big":           lim("api/big", 50),
		"~fb/203.0.113.7": lim("api/fb", 60),
	}))
	require.NoError(t, err)
	decide := func(key string) Result {
		r, _ := http.NewRequest("GET", "http://example.com/x", nil)
		r.Pattern, r.RemoteAddr = "GET /x", "203.0.113.7:1"
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		return decide(e, context.Background(), httpView{r})
	}
	res := decide("k_big")
	assert.Equal(t, "api/big", res.Decision.Policy, "the primary key's override")
	assert.Equal(t, int64(50), res.Decision.Limit.Requests)
	res = decide("")
	assert.Equal(t, "api", res.Decision.Policy, "a fallback key is decided by the default, never by an override")
	assert.Equal(t, int64(1), res.Decision.Limit.Requests)
}
