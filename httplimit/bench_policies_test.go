package httplimit

import (
	"context"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
)

// benchPolicies is benchEngine with three tiers read from X-Plan on
// another store's limiters, and opts.
func benchPolicies(b *testing.B, opts ...Option) *Engine {
	st := memstore.MustNew()
	b.Cleanup(func() { _ = st.Close() })
	lim := func(name string) *core.Limiter {
		return core.MustNewLimiter(st, core.Policy{Name: name, Limits: []core.Limit{core.Per(1<<30, 366*24*time.Hour)}})
	}
	plan, err := keyfuncs.Header("X-Plan")
	if err != nil {
		b.Fatal(err)
	}
	opts = append([]Option{WithTiers(plan, map[string]*core.Limiter{"pro": lim("bench/pro"), "enterprise": lim("bench/enterprise")})}, opts...)
	e, err := NewAdapterEngine(Adapter{Name: "bench", Outcome: true}, lim("bench"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkDecideTier is BenchmarkDecide for a request of a named tier:
// the tier's key function and lookup added to the decision.
func BenchmarkDecideTier(b *testing.B) {
	e := benchPolicies(b)
	r := benchRequest()
	r.Header.Set("X-Plan", "pro")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := decide(e, ctx, httpView{r})
		if res.Action != Pass || res.Decision.Policy != "bench/pro" {
			b.Fatal(res.Action, res.Decision.Policy)
		}
	}
}

// BenchmarkDecideOutcome is a request counted by outcome: the peek
// before, the charge after.
func BenchmarkDecideOutcome(b *testing.B) {
	e := benchPolicies(b, WithOutcome(Outcome{Count: StatusIn(401)}))
	r := benchRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := decide(e, ctx, httpView{r})
		if res.Action != Pass {
			b.Fatal(res.Action)
		}
		e.Outcome(ctx, &res, 401)
	}
}
