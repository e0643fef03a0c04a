package rules_test

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/rules"
)

// An elastic rule: 10 a minute, up to 20 while the rule's capacity limit
// (5 elastic admissions a minute, in the store) has room. The set gets its
// signals from WithSignals; keep one Signals for every reload.
func ExampleSet_WithSignals() {
	set, err := rules.Parse([]byte(`
rules:
  - name: search
    route: /search
    algorithm: fixed_window
    limits: ["10 per 1m"]
    elastic: {ceiling: 200%, capacity: "5 per 1m"}
`))
	if err != nil {
		panic(err)
	}
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	signals := rules.NewSignals(rules.SignalEnv{Store: store, Options: []core.Option{core.WithClock(clock)}})
	if set, err = set.WithSignals(signals); err != nil {
		panic(err)
	}
	r, _ := set.Rule("search")
	fmt.Println(r.Elastic.CeilingPercent, r.Elastic.Capacity)
	l := core.MustNewLimiter(store, r.Policy(), core.WithClock(clock))
	nominal, elastic := 0, 0
	for i := 0; i < 30; i++ {
		d, _ := l.Allow(context.Background(), "user:1")
		if d.Elastic {
			elastic++
		} else if d.Allowed {
			nominal++
		}
	}
	fmt.Println(nominal, elastic)
	// Output:
	// 200 5 per 1m
	// 10 5
}
