package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rules"
)

// The elastic part of the demo: one rule whose limit may be exceeded up to
// a ceiling while the service has room. Time is a manual clock and every
// request is sent in order, so the output is the same on every run.
const elasticRules = `
rules:
  - name: search
    route: /search
    key: header:X-User
    algorithm: fixed_window
    limits: ["10 per 1m"]
    elastic: {ceiling: 200%, capacity: "12 per 1m", max_in_flight: 3}
`

// demoElastic shows a client (alice) getting elastic admissions while the
// service is idle, losing them while another client (bob) loads it, and
// two clients sharing the fleet's spare capacity first come, first served.
func demoElastic(out io.Writer) error {
	store, err := memstore.New()
	if err != nil {
		return err
	}
	defer store.Close()
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	var inflight core.InFlight
	// the rules file, with its elastic rule's signals: the capacity limit
	// in the store, the load on the in-flight counter
	set, err := rules.Parse([]byte(elasticRules), rules.YAML)
	if err != nil {
		return err
	}
	set, err = set.WithSignals(rules.NewSignals(rules.SignalEnv{Store: store, InFlight: &inflight, Options: []core.Option{core.WithClock(clock)}}))
	if err != nil {
		return err
	}
	r, _ := set.Rule("search")
	p := r.Policy()
	var elastic atomic.Int64 // elastic admissions, as the Limiter's observer sees them
	count := core.ObserverFunc(func(e core.Event) {
		if e.Decision.Elastic {
			elastic.Add(1)
		}
	})
	l, err := core.NewLimiter(store, p, core.WithClock(clock), core.WithObserver(count))
	if err != nil {
		return err
	}
	key, err := keyfuncs.Header("X-User")
	if err != nil {
		return err
	}
	mw, err := nethttp.NewMiddleware(l, nethttp.WithKey(key), nethttp.WithClock(clock), nethttp.WithResetFormat(nethttp.ResetDelta))
	if err != nil {
		return err
	}
	hold := make(chan struct{}) // bob's slow requests wait on it
	app := mw(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("X-User") == "bob" && req.URL.Query().Get("slow") != "" {
			<-hold
		}
		w.WriteHeader(http.StatusOK)
	}))
	// count the requests in flight around the limiter and the handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		inflight.Enter()
		defer inflight.Exit()
		app.ServeHTTP(w, req)
	}))
	defer srv.Close()
	httpc := &http.Client{Timeout: 10 * time.Second}
	send := func(user, query string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", srv.URL+"/search"+query, nil)
		req.Header.Set("X-User", user)
		resp, err := httpc.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	// burst sends n requests for user, in order, and prints what came back
	burst := func(user string, n int) error {
		var parts []string
		ok := 0
		var last *http.Response
		before := elastic.Load()
		for i := 0; i < n; i++ {
			resp, err := send(user, "")
			if err != nil {
				return err
			}
			last = resp
			if resp.StatusCode == http.StatusOK {
				ok++
			}
		}
		el := int(elastic.Load() - before)
		parts = append(parts, fmt.Sprintf("%d sent, %d admitted (%d within the limit, %d elastic), %d denied", n, ok, ok-el, el, n-ok))
		parts = append(parts, fmt.Sprintf("last: %d, X-RateLimit-Limit %s, Remaining %s", last.StatusCode,
			last.Header.Get("X-RateLimit-Limit"), last.Header.Get("X-RateLimit-Remaining")))
		if ra := last.Header.Get("Retry-After"); ra != "" {
			parts[1] += ", Retry-After " + ra
		}
		fmt.Fprintf(out, "  %-5s %s\n        %s\n", user, parts[0], parts[1])
		return nil
	}

	fmt.Fprintln(out, "\nElastic throttling (a manual clock; each minute is a fresh window):")
	fmt.Fprintf(out, "  rule search: %v per user, elastic ceiling %d%%, fleet capacity %v for elastic admissions, room while at most %d requests are in flight\n",
		r.Limits[0], r.Elastic.CeilingPercent, r.Elastic.Capacity, r.Elastic.MaxInFlight)

	fmt.Fprintln(out, "minute 1, the service idle: alice bursts 25")
	if err := burst("alice", 25); err != nil {
		return err
	}

	clock.Advance(time.Minute)
	fmt.Fprintln(out, "minute 2, bob holds 3 slow requests in flight (the service is loaded): alice bursts 25")
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = send("bob", "?slow=1")
		}()
	}
	for inflight.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	if err := burst("alice", 25); err != nil {
		return err
	}
	close(hold)
	wg.Wait()

	clock.Advance(time.Minute)
	fmt.Fprintln(out, "minute 3, idle again: alice bursts 25, then bob bursts 25 (the fleet's 12 spare go first come, first served)")
	if err := burst("alice", 25); err != nil {
		return err
	}
	if err := burst("bob", 25); err != nil {
		return err
	}
	fmt.Fprintln(out, strings.TrimSpace(`
Notes: an elastic admission is a 200 whose headers still advertise the nominal
limit (Remaining 0); without room the rule is exactly its hard limit (same 429,
same Retry-After). The ceiling (20 a minute here) bounds each user, the
capacity limit (12 elastic a minute, fleet-wide on a shared store) bounds all
users together, and neither reserves spare capacity for anyone: docs/algorithms.md,
"Elastic throttling".`))
	return nil
}
