package fleet

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
)

// Defaults, each overridable by an Option.
const (
	// defaultMaxKeys bounds the local table (entries over all policies).
	defaultMaxKeys = 65_536
	// defaultMaxLease bounds the units one tier holds leased per key.
	defaultMaxLease = 1024
	// defaultWriteBackSync is the sync interval of a write-back policy when
	// neither the policy nor the tier sets one.
	defaultWriteBackSync = 100 * time.Millisecond
	// defaultBreakerThreshold is the number of consecutive remote failures
	// (connection failures or timeouts) that opens the breaker; the
	// failures of calls in flight together count once.
	defaultBreakerThreshold = 3
	// defaultCoolDown is how long an open breaker stops calling the remote
	// store before probing.
	defaultCoolDown = time.Second
	// defaultProbeInterval is how long a breaker whose half-open probe (a
	// real request) failed stays open before the next probe.
	defaultProbeInterval = 100 * time.Millisecond
	// defaultFleetSize divides each limit under FailLocal when neither the
	// policy nor WithFleetSize says otherwise.
	defaultFleetSize = 1
	// defaultFlapHorizon is how long a failure domain must fail every call
	// before FailLocal policies get their full local share (see
	// WithFlapHorizon).
	defaultFlapHorizon = 10 * time.Second
)

// The bounds of the tier's defaults of a policy's Sync and FleetSize:
// core's own (Policy.Validate refuses a policy beyond them), which
// TestBoundsAreCores checks.
const (
	maxSync      = time.Hour
	maxFleetSize = 100_000
)

// config is what the options set.
type config struct {
	noSyncLoop  bool          // tests that sync by hand only (export_test.go)
	noProbeLoop bool          // tests that probe by hand only (export_test.go)
	noForgive   bool          // tests of the breaker's logic: no starvation grace (export_test.go)
	flap        time.Duration // WithFlapHorizon's
	flapSet     bool          // WithFlapHorizon was given
	mode        core.Mode
	sync        time.Duration
	maxLease    int64
	maxKeys     int
	denyTTL     time.Duration
	threshold   int
	coolDown    time.Duration
	probe       time.Duration
	fleetSize   int
	clock       core.Clock
	observer    core.Observer
	noDenyCache bool // WithDenyCacheTTL(0)
	deferCounts bool
	failMode    core.FailMode // what FailOpen (the zero value) policies fail as
	errs        []error
	openings    *atomic.Int64 // the Store's count of breaker openings
	wake        chan struct{} // a breaker opened: the probe loop starts its watch (nil without the loop)

	// lag, in tests, is an injected scheduling-latency probe, whose loop
	// New does not run (export_test.go).
	lag *schedlag.Probe
}

// Option configures a [Store].
type Option func(*config)

// WithSync sets the tier's default sync interval d (a policy's own Sync
// overrides it). d > 0 also makes write-back the default mode (unless
// [WithDefaultMode] says otherwise); d = 0, the default, makes exact the
// default mode. At most maxSync.
func WithSync(d time.Duration) Option {
	return func(c *config) {
		if d < 0 || d > maxSync {
			c.errs = append(c.errs, fmt.Errorf("WithSync(%v): the interval must be in [0, %v]", d, maxSync))
		}
		c.sync = d
	}
}

// WithDefaultMode sets the mode of policies whose Mode is
// core.ModeDefault: core.ModeExact or core.ModeWriteBack. Without it the
// default is write-back when WithSync > 0, else exact.
func WithDefaultMode(m core.Mode) Option {
	return func(c *config) {
		if m != core.ModeExact && m != core.ModeWriteBack {
			c.errs = append(c.errs, fmt.Errorf("WithDefaultMode(%v): pass core.ModeExact or core.ModeWriteBack", m))
		}
		c.mode = m
	}
}

// WithMaxLease bounds the units of cost the tier holds leased per key (and
// per policy), the term of the write-back error bound; default
// 1024. A policy's lease is further capped at a quarter of its
// smallest limit divided by its fleet size. n = 0 disables leasing (write-back
// then decides every request remotely, like exact). n >= 0.
func WithMaxLease(n int64) Option {
	return func(c *config) {
		if n < 0 || n > 1<<31 {
			c.errs = append(c.errs, fmt.Errorf("WithMaxLease(%d): must be in [0, 2^31]", n))
		}
		c.maxLease = n
	}
}

// WithMaxKeys bounds the local table: deny-cache and lease entries over all
// policies (default 65,536). When full, an entry not used recently
// is evicted (CLOCK); eviction only loses a cached denial or unused leased
// units, it never admits more. An entry takes about 510 bytes of heap
// (the entry, its map slot, its places in the CLOCK ring and the sync
// list) plus its key (at most 512 bytes): the default table stays
// below 36 MB plus the keys, 70 MB with hostile 512-byte keys (measured
// at 33.5 MB and 67 MB after a flood of 100,000 distinct keys, since a
// Limit carries its calendar period; TestTableHeapBound). n >= 64.
func WithMaxKeys(n int) Option {
	return func(c *config) {
		if n < numShards || n > 1<<26 {
			c.errs = append(c.errs, fmt.Errorf("WithMaxKeys(%d): must be in [%d, 2^26]", n, numShards))
		}
		c.maxKeys = n
	}
}

// WithBreaker configures the circuit breakers (one per failure domain): a
// breaker opens after threshold consecutive outages of its domain (default
// 3), stays open for coolDown (default
// 1 s), then lets one request through as the probe, and after
// a failed probe stays open for probe (default 100 ms)
// before the next one. threshold >= 1, coolDown > 0, probe > 0.
func WithBreaker(threshold int, coolDown, probe time.Duration) Option {
	return func(c *config) {
		if threshold < 1 || coolDown <= 0 || probe <= 0 {
			c.errs = append(c.errs, fmt.Errorf("WithBreaker(%d, %v, %v): threshold must be >= 1 and the durations > 0", threshold, coolDown, probe))
		}
		c.threshold, c.coolDown, c.probe = threshold, coolDown, probe
	}
}

// WithFleetSize sets the default number of servers sharing the remote
// store (a policy's FleetSize overrides it): under FailLocal each limit is
// divided by it while the remote store is unreachable, and the lease cap is
// derived from it. Default 1; 1..maxFleetSize.
func WithFleetSize(n int) Option {
	return func(c *config) {
		if n < 1 || n > maxFleetSize {
			c.errs = append(c.errs, fmt.Errorf("WithFleetSize(%d): must be in [1, %d]", n, maxFleetSize))
		}
		c.fleetSize = n
	}
}

// WithClock sets the clock of the tier's own work: the breaker's cool-down
// and the sync round's now. Decisions use the now passed to Take. Default
// the system clock; tests pass a *core.ManualClock and call [Store.Sync]
// by hand.
func WithClock(clk core.Clock) Option {
	return func(c *config) {
		if clk == nil {
			c.errs = append(c.errs, errors.New("WithClock(nil): pass a core.Clock"))
		}
		c.clock = clk
	}
}

// WithObserver sends the tier's events (deny-cache hits, syncs, breaker
// transitions, fallback decisions) to o. Observe is called synchronously,
// also on the request path: it must be cheap and safe for concurrent use.
func WithObserver(o core.Observer) Option { return func(c *config) { c.observer = o } }

// WithDeferredDenialCounts makes the deny cache serve CountDenied policies
// in exact mode too (write-back mode always does): their locally denied
// requests are then counted at the remote store at the next sync round,
// before the key's next remote decision, or at Close, instead of at once.
// A hammering client then costs no round trip per request, but exact mode
// no longer returns exactly the remote store's decisions for those
// policies: the lock-out can lengthen by up to one sync interval, and
// meanwhile other servers may admit what the remote store would have
// denied had it counted at once (see the package documentation).
func WithDeferredDenialCounts() Option { return func(c *config) { c.deferCounts = true } }

// WithDefaultFailMode sets how the tier fails policies whose FailMode is
// core.FailOpen, the zero value, which the tier cannot tell from a policy
// that sets no fail mode: core.FailLocal (the default: they are decided by
// the embedded store with the divided limits, within the bound the
// package documentation states), core.FailOpen (they are admitted while
// their domain is down, without bound) or core.FailClosed. Policies set to
// core.FailClosed or core.FailLocal keep their own mode.
func WithDefaultFailMode(m core.FailMode) Option {
	return func(c *config) {
		if m > core.FailLocal {
			c.errs = append(c.errs, fmt.Errorf("WithDefaultFailMode(%v): pass core.FailLocal, core.FailOpen or core.FailClosed", m))
		}
		c.failMode = m
	}
}

// WithFlapHorizon sets how long a failure domain must fail every call
// (no answer at all, probes included) before FailLocal policies are
// decided from their full local share (each limit divided by the fleet
// size). Until then — while the remote store flaps, and for the first d
// of an outage — a local admission must also fit in the flap share, a
// quarter of the local share (each limit divided by 4 × the fleet size,
// at least 1), to which every unit the tier admits remotely is charged
// too: with the remote store answering some calls, the tiers cut off at
// any moment then admit at most a quarter of the limit on top of what
// the remote store admits (see the package documentation's bounds). The
// price is availability in the first d of a real outage: a quarter of
// the fleet's limit instead of all of it.
//
// Default 10 s, raised to twice the breaker's cool-down
// plus two probe intervals when those are longer; d = 0 turns the flap
// share off (the full share at once: up to 2L per window under a
// flapping store). d must be in [0, 1h].
func WithFlapHorizon(d time.Duration) Option {
	return func(c *config) {
		if d < 0 || d > time.Hour {
			c.errs = append(c.errs, fmt.Errorf("WithFlapHorizon(%v): must be in [0, 1h]", d))
		}
		c.flap, c.flapSet = d, true
	}
}
