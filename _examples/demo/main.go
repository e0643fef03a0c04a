// Command demo shows limitkit at work in one command, with no Redis and no
// flags:
//
//	go run ./_examples/demo
//
// It starts the example API (the nethttp adapter, the embedded store and
// the design notes' endpoint table, rules/default.yaml) on a loopback
// port, then for about 12 seconds drives traffic from three logged-in
// clients (two JWT users, one API key) and four anonymous ones, prints a
// line per client each second and every first denial, and ends with a
// per-client, per-rule table of what was allowed and denied and the
// headers the client last saw, and the decisions its /metrics counted.
// A last part (about 5 seconds) compares the fleet tier's modes on four
// simulated app servers sharing one store, then hangs that store. The
// last part (instant, on a manual clock) shows elastic throttling: a
// client admitted above its limit while the service is idle, and not while
// another client loads it.
//
// The anonymous clients' addresses are simulated: the demo's server trusts
// X-Forwarded-For from 127.0.0.1 (the -trusted-proxies setting of the
// other examples) and each client sends its own address in it. Two of them
// share an IPv6 /64 and therefore one quota.
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/rules"
)

const runFor = 12 * time.Second

// client is one simulated caller.
type client struct {
	name   string
	method string
	paths  []string
	rate   int    // requests per second
	ip     string // the address the "proxy" reports
	token  string // Bearer token, or ""
	apiKey string
}

func (c *client) authenticated() bool { return c.token != "" || c.apiKey != "" }

// tally is what one client saw under one rule.
type tally struct {
	sent, allowed, denied int
	last                  http.Header
	firstDenied           time.Duration
}

type recorder struct {
	mu    sync.Mutex
	start time.Time
	byKey map[[2]string]*tally // client, rule
	out   io.Writer
}

func (r *recorder) record(c *client, rule string, resp *http.Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]string{c.name, rule}
	t := r.byKey[k]
	if t == nil {
		t = &tally{}
		r.byKey[k] = t
	}
	t.sent++
	t.last = resp.Header.Clone()
	if resp.StatusCode == http.StatusTooManyRequests {
		t.denied++
		if t.denied == 1 {
			t.firstDenied = time.Since(r.start)
			fmt.Fprintf(r.out, "[%5.1fs] %-16s first 429 on %-14s after %d allowed: Retry-After %ss, X-RateLimit-Limit %s\n",
				t.firstDenied.Seconds(), c.name, rule, t.allowed, resp.Header.Get("Retry-After"), resp.Header.Get("X-RateLimit-Limit"))
		}
	} else if resp.StatusCode == http.StatusOK {
		t.allowed++
	}
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	if err := demoTraffic(out); err != nil {
		return err
	}
	if err := demoFleet(out); err != nil {
		return err
	}
	return demoElastic(out)
}

// demoTraffic is the demo's first part: the example API on a loopback
// port, the clients' traffic for runFor with a status line a second, then
// the summary table and the decisions /metrics counted.
func demoTraffic(out io.Writer) error {
	app, err := exampleapp.New(exampleapp.Config{
		TrustedProxies: []string{"127.0.0.1/32", "::1/128"},
		APIKeys:        []string{"demo-key-carol"},
	})
	if err != nil {
		return err
	}
	defer app.Close()
	_, h, err := app.HTTPHandler()
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	clients := demoClients(app)

	fmt.Fprintf(out, "limitkit demo: %s for %v, embedded store, rules/default.yaml:\n", srv.URL, runFor)
	fmt.Fprintf(out, "(metrics while it runs: curl %s%s; the summary ends with them)\n", srv.URL, exampleapp.MetricsPath)
	for _, r := range app.Rules.Rules() {
		fmt.Fprintf(out, "  %-14s %-5s %-6s %-13s by %-4s %v\n", r.Name, strings.Join(r.Methods, ","), r.Route, r.Identity, r.Key, r.Limits)
	}
	fmt.Fprintln(out)

	rec := &recorder{start: time.Now(), byKey: map[[2]string]*tally{}, out: out}
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	done := rec.drive(httpc, srv.URL, app.Rules, clients)
	rec.statusLines(clients, done)
	rec.summary(clients)
	if err := printMetrics(out, httpc, srv.URL+exampleapp.MetricsPath); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nNotes: the two 2001:db8:: clients share one /64 and so one quota; anonymous")
	fmt.Fprintln(out, "GETs share one per-IP quota across paths; each logged-in endpoint and method has")
	fmt.Fprintln(out, "its own per-user quota; a 429 carries Retry-After (seconds until the request")
	fmt.Fprintln(out, "would be allowed). Run the same API on a framework: go run ./_examples/nethttp")
	fmt.Fprintln(out, "(it serves the same metrics at /metrics; docs/operations.md lists them).")
	return nil
}

// demoClients are the simulated callers: three logged in (two JWT users
// of app, one API key) and four anonymous.
func demoClients(app *exampleapp.App) []*client {
	alice, _ := app.Token("alice", time.Hour)
	bob, _ := app.Token("bob", time.Hour)
	return []*client{
		{name: "alice (jwt)", method: "POST", paths: []string{"/api2"}, rate: 20, ip: "198.51.100.10", token: alice},
		{name: "bob (jwt)", method: "GET", paths: []string{"/api1", "/api2"}, rate: 6, ip: "198.51.100.10", token: bob},
		{name: "carol (api key)", method: "GET", paths: []string{"/api3"}, rate: 15, ip: "198.51.100.11", apiKey: "demo-key-carol"},
		{name: "203.0.113.10", method: "GET", paths: []string{"/", "/api1", "/docs"}, rate: 2, ip: "203.0.113.10"},
		{name: "203.0.113.66", method: "GET", paths: []string{"/api1", "/api2", "/api3", "/x"}, rate: 10, ip: "203.0.113.66"},
		{name: "2001:db8::1", method: "GET", paths: []string{"/a"}, rate: 4, ip: "2001:db8::1"},
		{name: "2001:db8::2", method: "GET", paths: []string{"/b"}, rate: 4, ip: "2001:db8::2"},
	}
}

// drive sends each client's requests to url at its rate until runFor has
// passed since r.start, recording each response under the rule of set it
// falls under; the returned channel is closed when every client is done.
func (r *recorder) drive(httpc *http.Client, url string, set *rules.Set, clients []*client) <-chan struct{} {
	deadline := r.start.Add(runFor)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / time.Duration(c.rate))
			defer tick.Stop()
			for i := 0; time.Now().Before(deadline); i++ {
				<-tick.C
				path := c.paths[i%len(c.paths)]
				resp, err := c.send(httpc, url+path)
				if err != nil {
					continue
				}
				rule := "(no rule)"
				if m := set.Match(c.method, path, c.authenticated()); m != nil {
					rule = m.Name
				}
				r.record(c, rule, resp)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// send is one request of c to url, its body read and closed.
func (c *client) send(httpc *http.Client, url string) (*http.Response, error) {
	req, _ := http.NewRequest(c.method, url, nil)
	req.Header.Set("X-Forwarded-For", c.ip)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.apiKey != "" {
		req.Header.Set("X-API-Key", c.apiKey)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// statusLines prints each client's allowed/denied counts every second
// until done is closed.
func (r *recorder) statusLines(clients []*client, done <-chan struct{}) {
	sec := time.NewTicker(time.Second)
	defer sec.Stop()
	for {
		select {
		case <-done:
			return
		case <-sec.C:
			r.mu.Lock()
			var parts []string
			for _, c := range clients {
				a, d := 0, 0
				for k, t := range r.byKey {
					if k[0] == c.name {
						a += t.allowed
						d += t.denied
					}
				}
				parts = append(parts, fmt.Sprintf("%s %d/%d", strings.Fields(c.name)[0], a, d))
			}
			fmt.Fprintf(r.out, "[%5.1fs] allowed/denied: %s\n", time.Since(r.start).Seconds(), strings.Join(parts, "  "))
			r.mu.Unlock()
		}
	}
}

// summary prints the table of what each client saw under each rule, in
// the clients' order, then by rule.
func (r *recorder) summary(clients []*client) {
	fmt.Fprintln(r.out, "\nsummary (headers are the last response's):")
	tw := tabwriter.NewWriter(r.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tRULE\tSENT\tALLOWED\tDENIED\tFIRST 429\tX-RateLimit-Limit\tRemaining\tReset\tRetry-After")
	var keys [][2]string
	for k := range r.byKey {
		keys = append(keys, k)
	}
	order := map[string]int{}
	for i, c := range clients {
		order[c.name] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		if order[keys[i][0]] != order[keys[j][0]] {
			return order[keys[i][0]] < order[keys[j][0]]
		}
		return keys[i][1] < keys[j][1]
	})
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, k := range keys {
		t := r.byKey[k]
		first := "-"
		if t.denied > 0 {
			first = fmt.Sprintf("%.1fs", t.firstDenied.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", k[0], k[1], t.sent, t.allowed, t.denied, first,
			dash(t.last.Get("X-RateLimit-Limit")), dash(t.last.Get("X-RateLimit-Remaining")), dash(t.last.Get("X-RateLimit-Reset")), dash(t.last.Get("Retry-After")))
	}
	tw.Flush()
}

// printMetrics prints the limitkit_decisions_total series of the demo's
// /metrics: what a Prometheus server would scrape.
func printMetrics(out io.Writer, c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nGET %s (decisions by rule and outcome; also store errors and latency, keys held):\n", url)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "limitkit_decisions_total{") && !strings.HasSuffix(line, " 0") {
			fmt.Fprintln(out, "  "+line)
		}
		if strings.HasPrefix(line, "limitkit_memstore_keys{") {
			fmt.Fprintln(out, "  "+line)
		}
	}
	return nil
}
