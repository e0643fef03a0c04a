package main

import (
	"github.com/limitkit/limitkit/httplimit"

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
	d, err := newElasticDemo(out)
	if err != nil {
		return err
	}
	defer d.close()
	r := d.rule
	fmt.Fprintln(out, "\nElastic throttling (a manual clock; each minute is a fresh window):")
	fmt.Fprintf(out, "  rule search: %v per user, elastic ceiling %d%%, fleet capacity %v for elastic admissions, room while at most %d requests are in flight\n",
		r.Limits[0], r.Elastic.CeilingPercent, r.Elastic.Capacity, r.Elastic.MaxInFlight)

	fmt.Fprintln(out, "minute 1, the service idle: alice bursts 25")
	if err := d.burst("alice", 25); err != nil {
		return err
	}

	d.clock.Advance(time.Minute)
	fmt.Fprintln(out, "minute 2, bob holds 3 slow requests in flight (the service is loaded): alice bursts 25")
	release := d.holdInFlight("bob", 3)
	err = d.burst("alice", 25)
	release()
	if err != nil {
		return err
	}

	d.clock.Advance(time.Minute)
	fmt.Fprintln(out, "minute 3, idle again: alice bursts 25, then bob bursts 25 (the fleet's 12 spare go first come, first served)")
	if err := d.burst("alice", 25); err != nil {
		return err
	}
	if err := d.burst("bob", 25); err != nil {
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

// elasticDemo is the elastic rule served on a loopback port: its store,
// its manual clock, the requests in flight (the load its rule reads) and
// the elastic admissions its limiter's observer counted.
type elasticDemo struct {
	out      io.Writer
	rule     *rules.Rule
	clock    *core.ManualClock
	store    memstore.Store
	inflight core.InFlight
	elastic  atomic.Int64
	hold     chan struct{} // bob's slow requests wait on it
	srv      *httptest.Server
	httpc    *http.Client
}

// newElasticDemo builds the rules file's elastic rule, with its signals
// (the capacity limit in the store, the load on the in-flight counter),
// its limiter and nethttp middleware, and serves it.
func newElasticDemo(out io.Writer) (*elasticDemo, error) {
	store, err := memstore.New()
	if err != nil {
		return nil, err
	}
	d := &elasticDemo{out: out, store: store, hold: make(chan struct{}), httpc: &http.Client{Timeout: 10 * time.Second},
		clock: core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))}
	h, err := d.limited()
	if err != nil {
		store.Close()
		return nil, err
	}
	// count the requests in flight around the limiter and the handler
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d.inflight.Enter()
		defer d.inflight.Exit()
		h.ServeHTTP(w, req)
	}))
	return d, nil
}

// limited is the search handler behind the elastic rule's middleware.
func (d *elasticDemo) limited() (http.Handler, error) {
	set, err := rules.Parse([]byte(elasticRules))
	if err != nil {
		return nil, err
	}
	set, err = set.WithSignals(rules.NewSignals(rules.SignalEnv{Store: d.store, InFlight: &d.inflight, Options: []core.Option{core.WithClock(d.clock)}}))
	if err != nil {
		return nil, err
	}
	d.rule, _ = set.Rule("search")
	count := core.ObserverFunc(func(e core.Event) { // elastic admissions, as the Limiter's observer sees them
		if e.Decision.Elastic {
			d.elastic.Add(1)
		}
	})
	l, err := core.NewLimiter(d.store, d.rule.Policy(), core.WithClock(d.clock), core.WithObserver(count))
	if err != nil {
		return nil, err
	}
	key, err := keyfuncs.Header("X-User")
	if err != nil {
		return nil, err
	}
	mw, err := nethttp.NewMiddleware(l, httplimit.WithKey(key), httplimit.WithClock(d.clock), httplimit.WithResetDelta())
	if err != nil {
		return nil, err
	}
	return mw(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("X-User") == "bob" && req.URL.Query().Get("slow") != "" {
			<-d.hold
		}
		w.WriteHeader(http.StatusOK)
	})), nil
}

func (d *elasticDemo) close() {
	d.srv.Close()
	d.store.Close()
}

// send is one search of user with query, its body read and closed.
func (d *elasticDemo) send(user, query string) (*http.Response, error) {
	req, _ := http.NewRequest("GET", d.srv.URL+"/search"+query, nil)
	req.Header.Set("X-User", user)
	resp, err := d.httpc.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// holdInFlight sends n slow requests of user and returns once they are
// all in flight; release lets them finish and waits for them.
func (d *elasticDemo) holdInFlight(user string, n int64) (release func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = d.send(user, "?slow=1")
		}()
	}
	for d.inflight.Load() < n {
		time.Sleep(time.Millisecond)
	}
	return func() {
		close(d.hold)
		wg.Wait()
	}
}

// burst sends n requests for user, in order, and prints what came back.
func (d *elasticDemo) burst(user string, n int) error {
	ok := 0
	var last *http.Response
	before := d.elastic.Load()
	for i := 0; i < n; i++ {
		resp, err := d.send(user, "")
		if err != nil {
			return err
		}
		last = resp
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	el := int(d.elastic.Load() - before)
	summary := fmt.Sprintf("%d sent, %d admitted (%d within the limit, %d elastic), %d denied", n, ok, ok-el, el, n-ok)
	headers := fmt.Sprintf("last: %d, X-RateLimit-Limit %s, Remaining %s", last.StatusCode,
		last.Header.Get("X-RateLimit-Limit"), last.Header.Get("X-RateLimit-Remaining"))
	if ra := last.Header.Get("Retry-After"); ra != "" {
		headers += ", Retry-After " + ra
	}
	fmt.Fprintf(d.out, "  %-5s %s\n        %s\n", user, summary, headers)
	return nil
}
