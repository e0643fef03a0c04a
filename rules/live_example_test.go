package rules_test

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/rules"
)

// A Live serves a rule set and swaps in a new one while serving: the rule
// whose limits did not change keeps its count, the one whose limits
// changed starts afresh (on the embedded store).
func ExampleLive() {
	store := memstore.MustNew()
	defer store.Close()
	v1, _ := rules.Parse([]byte(`
rules:
  - {name: search, route: /search, limits: ["3 per 1m"]}
  - {name: upload, route: /upload, limits: ["2 per 1m"]}
`))
	// The value built per rule is usually the adapter's middleware; here,
	// a description.
	live, err := rules.NewLive(store, v1, func(r *rules.Rule, ls rules.Limiters) (string, error) {
		return fmt.Sprint(r.Name, " ", ls.Default.Policy().Limits), nil
	}, core.WithClock(core.NewManualClock(time.Unix(0, 0))))
	if err != nil {
		fmt.Println(err)
		return
	}
	request := func(path string) {
		snap := live.Acquire() // one snapshot for the whole request
		defer snap.Release()
		r := snap.Set().Match("GET", path, false)
		d, _ := snap.Limiter(r).Allow(context.Background(), "client-1")
		h, _ := snap.Handler(r)
		fmt.Printf("%-28s allowed=%v remaining=%d\n", h, d.Allowed, d.Remaining)
	}
	request("/search")
	request("/upload")

	v2, _ := rules.Parse([]byte(`
rules:
  - {name: search, route: /search, limits: ["3 per 1m"]}
  - {name: upload, route: /upload, limits: ["5 per 1m"]}
`))
	change, err := live.Swap(v2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(change)
	request("/search")
	request("/upload")
	// Output:
	// search [3 per 1m]            allowed=true remaining=2
	// upload [2 per 1m]            allowed=true remaining=1
	// limits changed [upload: gcra 2 per 1m -> gcra 5 per 1m]; 1 unchanged
	// search [3 per 1m]            allowed=true remaining=1
	// upload [5 per 1m]            allowed=true remaining=4
}
