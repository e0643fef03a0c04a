package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
)

// The fleet-mode part of the demo: four app servers share one remote store.
// The demo needs no Redis, so the remote store is the embedded store behind
// a simulated network round trip (remoteRTT per call); with -redis the
// examples put the same tier in front of real Redis.
const (
	remoteRTT   = 200 * time.Microsecond
	fleetFor    = 1500 * time.Millisecond
	fleetSize   = 4
	perServer   = 8 // goroutines per server
	fleetWindow = time.Minute
)

// simRemote is a shared store reached over a simulated network: every call
// costs remoteRTT and is counted; hung makes every call wait for its
// deadline, as a SIGSTOPped Redis does.
type simRemote struct {
	st    memstore.Store
	calls atomic.Int64
	hung  atomic.Bool
}

func (r *simRemote) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	r.calls.Add(1)
	if r.hung.Load() {
		<-ctx.Done()
		return core.Decision{}, ctx.Err()
	}
	t := time.NewTimer(remoteRTT)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return core.Decision{}, ctx.Err()
	}
	return r.st.Take(ctx, key, p, now, cost)
}

// fleetRun is one row of the comparison.
type fleetRun struct {
	name                 string
	decisions, admitted  int64
	degraded             int64 // decided by a fail mode, not by the shared store
	calls                int64
	limit                int64
	bound                int64 // what the mode promises to admit at most in the run
	elapsed              time.Duration
	maxLatency, p99      time.Duration
	deadlinePaid, opened int64
}

// runFleet hammers one hot key from fleetSize servers × perServer
// goroutines for fleetFor and counts decisions, admissions and remote calls.
func runFleet(name string, mk func(remote core.Store) (core.Store, func()), policy core.Policy) (fleetRun, error) {
	remote := &simRemote{st: memstore.MustNew()}
	defer remote.st.Close()
	run := fleetRun{name: name, limit: policy.Limits[0].Requests}
	var lims []*core.Limiter
	for i := 0; i < fleetSize; i++ {
		st, done := mk(remote)
		defer done()
		l, err := core.NewLimiter(st, policy, core.WithLogger(nil))
		if err != nil {
			return run, err
		}
		lims = append(lims, l)
	}
	var decisions, admitted, degraded atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(fleetFor)
	for _, l := range lims {
		for g := 0; g < perServer; g++ {
			wg.Add(1)
			go func(l *core.Limiter) {
				defer wg.Done()
				for time.Now().Before(stop) {
					d, _ := l.Allow(context.Background(), "hot-client")
					decisions.Add(1)
					if d.Allowed {
						admitted.Add(1)
					}
					if d.Degraded {
						degraded.Add(1)
					}
				}
			}(l)
		}
	}
	wg.Wait()
	run.elapsed = time.Since(start)
	run.decisions, run.admitted, run.degraded, run.calls = decisions.Load(), admitted.Load(), degraded.Load(), remote.calls.Load()
	return run, nil
}

// runOutage hangs the remote store mid-traffic under the fleet tier with
// FailLocal, and measures what requests paid.
func runOutage() (fleetRun, error) {
	remote := &simRemote{st: memstore.MustNew()}
	defer remote.st.Close()
	run := fleetRun{name: "remote hung (breaker, fail_mode local)"}
	policy := core.Policy{Name: "demo-outage", FailMode: core.FailLocal, Limits: []core.Limit{core.Per(400, fleetWindow)}}
	var opened atomic.Int64
	obs := core.ObserverFunc(func(e core.Event) {
		if e.Kind == core.EventBreaker && e.To == "open" {
			opened.Add(1)
		}
	})
	var lims []*core.Limiter
	for i := 0; i < fleetSize; i++ {
		tier, err := fleet.New(remote, fleet.WithFleetSize(fleetSize), fleet.WithObserver(obs),
			fleet.WithBreaker(3, 500*time.Millisecond, 50*time.Millisecond))
		if err != nil {
			return run, err
		}
		defer tier.Close()
		l, err := core.NewLimiter(tier, policy, core.WithLogger(nil), core.WithTimeout(50*time.Millisecond))
		if err != nil {
			return run, err
		}
		lims = append(lims, l)
	}
	remote.hung.Store(true)
	var mu sync.Mutex
	var lat []time.Duration
	var decisions, admitted, paid atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(fleetFor)
	for _, l := range lims {
		for g := 0; g < perServer; g++ {
			wg.Add(1)
			go func(l *core.Limiter) {
				defer wg.Done()
				var mine []time.Duration
				for time.Now().Before(stop) {
					t0 := time.Now()
					d, _ := l.Allow(context.Background(), "hot-client")
					el := time.Since(t0)
					if el >= 40*time.Millisecond {
						paid.Add(1)
					} else {
						mine = append(mine, el)
					}
					decisions.Add(1)
					if d.Allowed {
						admitted.Add(1)
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}(l)
		}
	}
	wg.Wait()
	slices.Sort(lat)
	if len(lat) > 0 {
		run.p99 = lat[len(lat)*99/100]
	}
	run.decisions, run.admitted, run.calls = decisions.Load(), admitted.Load(), remote.calls.Load()
	run.deadlinePaid, run.opened = paid.Load(), opened.Load()
	run.limit = 400
	return run, nil
}

// Bounds of the comparison's policy (2,000 per minute, fleet size 4), as
// docs/fleet.md states them: the limit plus what GCRA refills during
// the run; write-back adds the servers' lease cap, min(1024, 2000/(4×4))
// each; when some decisions were degraded (FailLocal, the tier's default,
// decided them: a loaded machine missed the deadline), the FailLocal bound
// 2L replaces L (each server may spend its local share L/N on top of what
// the shared store admits).
const (
	fleetLimit = 2000
	leaseCap   = fleetLimit / (4 * fleetSize)
)

// refill is what the policy refills in d.
func refill(d time.Duration) int64 { return fleetLimit * int64(d) / int64(fleetWindow) }

// fleetRows runs the three rows of the comparison.
func fleetRows() ([]fleetRun, error) {
	policy := core.Policy{Name: "demo-fleet", FleetSize: fleetSize, Limits: []core.Limit{core.Per(fleetLimit, fleetWindow)}}
	plain := func(r core.Store) (core.Store, func()) { return r, func() {} }
	tier := func(opts ...fleet.Option) func(core.Store) (core.Store, func()) {
		return func(r core.Store) (core.Store, func()) {
			t, err := fleet.New(r, opts...)
			if err != nil {
				panic(err) // static options: a programming error
			}
			return t, func() { _ = t.Close() }
		}
	}
	var rows []fleetRun
	for _, c := range []struct {
		name  string
		mk    func(core.Store) (core.Store, func())
		lease int64
	}{
		{"no tier: every decision is a round trip", plain, 0},
		{"fleet tier, exact (deny cache)", tier(), 0},
		{"fleet tier, write-back, sync 100ms", tier(fleet.WithSync(100 * time.Millisecond)), fleetSize * leaseCap},
	} {
		r, err := runFleet(c.name, c.mk, policy)
		if err != nil {
			return nil, err
		}
		l := int64(fleetLimit)
		if r.degraded > 0 {
			l = 2 * fleetLimit
		}
		r.bound = l + refill(r.elapsed) + 1 + c.lease
		rows = append(rows, r)
	}
	return rows, nil
}

// verdict says, from the row's own numbers, whether it kept its bound.
func (r fleetRun) verdict() string {
	if r.admitted <= r.bound {
		return fmt.Sprintf("yes (≤ %d)", r.bound)
	}
	return fmt.Sprintf("NO: %d over %d", r.admitted-r.bound, r.bound)
}

// demoFleet prints the comparison of the fleet tier's modes.
func demoFleet(out io.Writer) error {
	fmt.Fprintf(out, "\nfleet mode: %d app servers × %d goroutines hammer one client for %v; the shared store\n", fleetSize, perServer, fleetFor)
	fmt.Fprintf(out, "is simulated (the embedded store behind a %v round trip) so the demo needs no Redis:\n", remoteRTT)
	rows, err := fleetRows()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "MODE\tDECISIONS\tADMITTED (limit %d)\tDEGRADED\tWITHIN BOUND\tREMOTE CALLS\tCALLS PER DECISION\t\n", fleetLimit)
	kept := true
	for _, r := range rows {
		kept = kept && r.admitted <= r.bound
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%.4f\t\n", r.name, r.decisions, r.admitted, r.degraded, r.verdict(), r.calls, float64(r.calls)/float64(max(1, r.decisions)))
	}
	tw.Flush()
	o, err := runOutage()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nthen the shared store hangs (as a SIGSTOPped Redis does; 50ms deadline): the breakers opened %d times,\n", o.opened)
	fmt.Fprintf(out, "%d of %d requests paid the deadline (those in flight before a breaker opened), the rest were decided\n", o.deadlinePaid, o.decisions)
	fmt.Fprintf(out, "locally in p99 %v; fail_mode local admitted %d (each server 400/%d of the 400/min limit).\n", o.p99.Round(time.Microsecond), o.admitted, fleetSize)
	if kept {
		fmt.Fprintf(out, "Every mode kept its bound: the limit plus what it refills in the run (write-back: plus %d × %d leased;\n", fleetSize, leaseCap)
		fmt.Fprintln(out, "with DEGRADED decisions, the fail_mode local bound 2L replaces the limit L).")
	} else {
		fmt.Fprintln(out, "A mode went over its bound in this run (see WITHIN BOUND): this machine is too loaded for the shared")
		fmt.Fprintln(out, "store's simulated round trips, and the fail mode decided the DEGRADED requests.")
	}
	fmt.Fprintln(out, "Write-back trades a bounded error (docs/fleet.md) for far fewer round trips. With -redis the")
	fmt.Fprintln(out, "examples run the same tier: -sync 100ms for write-back.")
	return nil
}
