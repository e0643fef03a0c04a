package metrics

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// defaultMaxPolicies is the number of distinct policy label values a
// [Metrics] keeps unless [WithMaxPolicies] says otherwise; events of
// further policies are counted under the policy "other".
const defaultMaxPolicies = 100

// otherPolicy is the policy label of the events of policies beyond the
// cap ([WithMaxPolicies]). A policy named "other" shares its series.
const otherPolicy = "other"

// defaultLatencyBuckets are the store-latency histogram's upper bounds, in
// seconds: 50µs to 250ms, around the limiter's 50ms default deadline.
var defaultLatencyBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25}

// Metrics is a [core.Observer] that counts what it observes, and a
// [prometheus.Collector] that exports the counts: register it with
// prometheus.MustRegister(m) (or a Registry of your own) and pass it to
// each limiter with core.WithObserver(m), and to a fleet tier as its
// observer. The metric names and labels are listed in the package doc.
//
// Observe finds a policy's series by the address of its name (a map
// lookup when the name comes in another string), then adds to a counter or
// two (and observes a histogram for stores that do I/O); it does not
// allocate once a policy has been seen. Build a Metrics with [New]; the zero value
// is not usable. A Metrics is safe for concurrent use.
type Metrics struct {
	maxPolicies int

	decisions   *prometheus.CounterVec
	errors      *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	denyCache   *prometheus.CounterVec
	fallbacks   *prometheus.CounterVec
	breaker     *prometheus.GaugeVec
	inFlight    *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	syncs       *prometheus.CounterVec
	syncErrors  *prometheus.CounterVec
	syncKeys    prometheus.Counter
	syncLatency prometheus.Histogram
	source      *prometheus.CounterVec

	memKeys, memEvictions *prometheus.Desc
	limit                 *prometheus.Desc

	policiesMu sync.Mutex
	policies   []core.Policy // watched by WatchPolicy, in order of first call

	// byName is an immutable map, replaced under mu when a policy is added.
	byName atomic.Pointer[map[string]*policy]
	mu     sync.Mutex
	full   atomic.Bool // the cap is reached; other is set
	other  *policy     // the series of otherPolicy, created at the cap

	storesMu sync.Mutex
	stores   []watched

	// The fleet tier ([Metrics.WatchFleet]): its breakers serve every
	// policy and report no policy, so their states are aggregated here
	// (how many tier breakers are open, half-open) and exported under
	// every known policy.
	fleet              atomic.Bool
	tierOpen, tierHalf atomic.Int64
	tierSeen           atomic.Bool // a tier breaker reported a transition
}

type watched struct {
	name string
	s    statsSource
}

// statsSource is what [Metrics.WatchMemstore] reads at each scrape.
type statsSource interface {
	Stats() memstore.Stats
}

// elasticOutcome is the outcome label of a decision admitted above the
// policy's limits by elastic throttling (core.Decision.Elastic): counted
// apart from "allowed" so that the elastic share of the traffic shows.
const elasticOutcome = "elastic"

// The outcome label of a decision, as an index of policy.decisions.
const (
	allowed  = iota + 1 // admitted within the limit
	denied              // a limit is exhausted
	shadowed            // a Shadow policy would have denied; admitted
	degraded            // the store failed and a fail mode decided
	elastic             // admitted above the limits (elasticOutcome)
)

// outcomeNames are the outcome labels by index.
var outcomeNames = [...]string{allowed: "allowed", denied: "denied", shadowed: "shadowed", degraded: "degraded", elastic: elasticOutcome}

// outcomeOf classifies d: degraded first, then shadowed, elastic,
// allowed, denied.
func outcomeOf(d *core.Decision) int {
	switch {
	case d.Degraded:
		return degraded
	case d.Shadowed:
		return shadowed
	case d.Allowed && d.Elastic:
		return elastic
	case d.Allowed:
		return allowed
	}
	return denied
}

// errorKinds are core.ClassifyError's names of an error, the values of
// the kind label: a policy's error series are indexed by them.
var errorKinds = [...]string{"timeout", "connection", "circuit_open", "canceled", "tryagain", "clusterdown", "redirect", "readonly", "loading", "oom", "script", "other"}

// baseKinds are the kinds every store can fail with, exported at zero
// from the start.
var baseKinds = [...]string{"timeout", "connection", "circuit_open", "canceled", "other"}

// kindIndex is the index of kind k in errorKinds; a name it does not
// know counts as "other", so that no error goes uncounted and the label
// stays bounded.
func kindIndex(k string) int {
	for i, s := range errorKinds {
		if s == k {
			return i
		}
	}
	return len(errorKinds) - 1
}

// policy holds the series of one policy label value, resolved once.
type policy struct {
	name      string
	decisions [elastic + 1]prometheus.Counter
	errors    [len(errorKinds)]prometheus.Counter // the kinds every store can fail with
	// The kinds of a store's error replies (tryagain, oom, ...), created
	// on first use: a policy on the embedded store shows none of them.
	replies [len(errorKinds)]lazy[prometheus.Counter]
	// Created on first use, so that a policy on the embedded store shows no
	// empty latency histogram and one without a fleet tier no tier series.
	latency     lazy[prometheus.Observer]
	denyCache   lazy[prometheus.Counter]
	fallbacks   lazy[prometheus.Counter]
	breaker     lazy[prometheus.Gauge]
	inFlight    lazy[prometheus.Gauge]
	transitions [len(breakerStates)]lazy[prometheus.Counter]
}

// lazy is a series created on first use. Two goroutines may both create
// it: prometheus returns the same child for the same labels.
type lazy[T any] struct{ p atomic.Pointer[T] }

func (l *lazy[T]) get(create func() T) T {
	if p := l.p.Load(); p != nil {
		return *p
	}
	v := create()
	l.p.Store(&v)
	return v
}

// Option configures [New].
type Option func(*config) error

type config struct {
	namespace   string
	maxPolicies int
	buckets     []float64
	constLabels prometheus.Labels
}

// WithNamespace sets the metric names' prefix (default "limitkit"): with
// "api", limitkit_decisions_total becomes api_decisions_total. It must be
// a valid metric name prefix.
func WithNamespace(ns string) Option {
	return func(c *config) error { c.namespace = ns; return nil }
}

// WithMaxPolicies caps the number of distinct policy label values (default
// 100); events of policies seen after the cap is reached
// are counted under the policy "other". It bounds the series count when
// policies are built at run time. It must be >= 1.
func WithMaxPolicies(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("metrics: WithMaxPolicies(%d): the cap must be >= 1", n)
		}
		c.maxPolicies = n
		return nil
	}
}

// WithLatencyBuckets sets the upper bounds, in seconds, of the store and
// sync latency histograms (default 50 µs to 250 ms, 12 buckets). They must be
// positive and increasing.
func WithLatencyBuckets(b ...float64) Option {
	return func(c *config) error {
		if len(b) == 0 {
			return errors.New("metrics: WithLatencyBuckets: no buckets")
		}
		for i, v := range b {
			if !(v > 0) || i > 0 && v <= b[i-1] {
				return fmt.Errorf("metrics: WithLatencyBuckets(%v): bounds must be positive and increasing", b)
			}
		}
		c.buckets = slices.Clone(b)
		return nil
	}
}

// WithConstLabels adds labels with fixed values to every metric: to tell
// apart two Metrics registered in one registry (two fleet tiers, say).
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) error {
		c.constLabels = l
		return nil
	}
}

// New returns a Metrics. It registers nothing: pass it to
// prometheus.Register (or MustRegister) yourself.
func New(opts ...Option) (*Metrics, error) {
	c := config{namespace: "limitkit", maxPolicies: defaultMaxPolicies, buckets: slices.Clone(defaultLatencyBuckets)}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("metrics: New: nil Option")
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	ns, cl := c.namespace, c.constLabels
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help, ConstLabels: cl}, labels)
	}
	m := &Metrics{
		maxPolicies: c.maxPolicies,
		decisions: counter("decisions_total",
			"Decisions by policy and outcome: allowed, denied, shadowed (a shadow policy would have denied), elastic (admitted above the limits by elastic throttling), degraded (the store failed; the fail mode decided).",
			"policy", "outcome"),
		errors: counter("store_errors_total",
			"Store failures by policy and kind: timeout, connection, circuit_open, canceled, other, and the kinds of a store's error replies as they occur (tryagain, clusterdown, redirect, readonly, loading, oom, script). Each one is a degraded decision.",
			"policy", "kind"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "store_latency_seconds", ConstLabels: cl, Buckets: c.buckets,
			Help: "Duration of the store call of each decision, for stores that do I/O (Redis), failures included."}, []string{"policy"}),
		denyCache: counter("deny_cache_hits_total",
			"Decisions a store tier denied from its local deny cache without calling the remote store.", "policy"),
		fallbacks: counter("fallbacks_total",
			"Decisions a store tier made locally because the remote store failed or its breaker was open.", "policy"),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "breaker_state", ConstLabels: cl,
			Help: "State of a store tier's circuit breaker: 0 closed, 1 open, 2 half-open."}, []string{"policy"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "in_flight", ConstLabels: cl,
			Help: "In-flight (concurrency) slots this process holds, by policy (core.Concurrency)."}, []string{"policy"}),
		transitions: counter("breaker_transitions_total",
			"Changes of a store tier's circuit breaker, by the state entered.", "policy", "to"),
		syncs: counter("syncs_total",
			"Round trips of a store tier's write-back sync, by result: ok or error.", "result"),
		syncErrors: counter("sync_errors_total",
			"Failed syncs of a store tier, by kind: timeout, connection, circuit_open, canceled, other.", "kind"),
		syncKeys: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "sync_keys_total", ConstLabels: cl,
			Help: "Entries sent by a store tier's syncs."}),
		syncLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "sync_latency_seconds", ConstLabels: cl, Buckets: c.buckets,
			Help: "Duration of a store tier's sync round trips."}),
		source: counter("limit_source_total",
			"Requests of a limit source (core.Sourced), by result: hit (answered from its cache); found, not_found, error, timeout (a lookup of the source); fallback (a request decided by the fallback: the lookup failed or timed out, the request's context ended, or too many lookups were under way).",
			"policy", "result"),
		memKeys: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "memstore_keys"),
			"Keys held by an embedded store, over all policies.", []string{"store"}, cl),
		memEvictions: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "memstore_evictions_total"),
			"Live keys an embedded store dropped to make room under its key cap.", []string{"store"}, cl),
		limit: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "limit_requests"),
			"Configured limits of the policies passed to WatchPolicy: the requests (cost units) a key may spend per window, by policy, limit (its index in Policy.Limits) and window (seconds).",
			[]string{"policy", "limit", "window"}, cl),
	}
	if err := validName(prometheus.BuildFQName(ns, "", "decisions_total")); err != nil {
		return nil, err
	}
	empty := map[string]*policy{}
	m.byName.Store(&empty)
	return m, nil
}

func validName(s string) error {
	for i, r := range s {
		if r == '_' || r == ':' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9' {
			continue
		}
		return fmt.Errorf("metrics: WithNamespace: %q is not a valid metric name prefix (letters, digits, '_', ':')", s)
	}
	return nil
}

// MustNew is New that panics on an invalid option.
func MustNew(opts ...Option) *Metrics {
	m, err := New(opts...)
	if err != nil {
		panic(err)
	}
	return m
}

func (m *Metrics) newPolicy(name string) *policy {
	p := &policy{name: name}
	for o := allowed; o <= elastic; o++ {
		p.decisions[o] = m.decisions.WithLabelValues(name, outcomeNames[o])
	}
	for _, k := range baseKinds {
		p.errors[kindIndex(k)] = m.errors.WithLabelValues(name, k)
	}
	return p
}

// policy returns the series of policy name, adding them on first sight
// while under the cap: one lookup in a copy-on-write map, without a lock.
func (m *Metrics) policy(name string) *policy {
	if p := (*m.byName.Load())[name]; p != nil {
		return p
	}
	return m.add(name)
}

func (m *Metrics) add(name string) *policy {
	if m.full.Load() {
		return m.other
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.byName.Load()
	if p := old[name]; p != nil {
		return p
	}
	if len(old) >= m.maxPolicies {
		// other is set once, before full, which Observe reads first; a
		// caller that saw full false and waited for mu finds it set
		if m.other == nil {
			m.other = m.newPolicy(otherPolicy)
			m.full.Store(true)
		}
		return m.other
	}
	next := make(map[string]*policy, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	p := m.newPolicy(name)
	next[name] = p
	m.byName.Store(&next)
	return p
}

// Observe counts e. It implements [core.Observer].
func (m *Metrics) Observe(e core.Event) {
	switch e.Kind {
	case core.EventDecision:
		p := m.policy(e.Policy)
		p.decisions[outcomeOf(&e.Decision)].Inc()
		if e.Latency > 0 {
			p.latency.get(func() prometheus.Observer { return m.latency.WithLabelValues(p.name) }).Observe(e.Latency.Seconds())
		}
		if e.Err != nil {
			k := core.ClassifyError(e.Err)
			i := kindIndex(k)
			if c := p.errors[i]; c != nil {
				c.Inc()
			} else {
				p.replies[i].get(func() prometheus.Counter { return m.errors.WithLabelValues(p.name, errorKinds[i]) }).Inc()
			}
		}
	case core.EventVerb:
		// a verb (a peek, charge, refund or reset) is not a decision:
		// neither allowed, nor denied, nor degraded (its store error
		// surfaces at the next decision)
	case core.EventInFlight:
		p := m.policy(e.Policy)
		p.inFlight.get(func() prometheus.Gauge { return m.inFlight.WithLabelValues(p.name) }).Add(float64(e.Keys))
	case core.EventDenyCacheHit:
		p := m.policy(e.Policy)
		p.denyCache.get(func() prometheus.Counter { return m.denyCache.WithLabelValues(p.name) }).Inc()
	case core.EventFallback:
		p := m.policy(e.Policy)
		p.fallbacks.get(func() prometheus.Counter { return m.fallbacks.WithLabelValues(p.name) }).Inc()
	case core.EventBreaker:
		to := breakerIndex(e.To)
		if to < 0 {
			return
		}
		if e.Policy == "" { // a tier's breaker, serving every policy
			m.tierBreaker(breakerIndex(e.From), to)
			return
		}
		p := m.policy(e.Policy)
		p.breaker.get(func() prometheus.Gauge { return m.breaker.WithLabelValues(p.name) }).Set(float64(to))
		p.transitions[to].get(func() prometheus.Counter { return m.transitions.WithLabelValues(p.name, breakerStates[to]) }).Inc()
	case core.EventSource:
		r := e.Source // hit, fallback
		if r == "lookup" {
			switch {
			case e.Err != nil && core.ClassifyError(e.Err) == "timeout":
				r = "timeout"
			case e.Err != nil:
				r = "error"
			case e.Keys == 0:
				r = "not_found"
			default:
				r = "found"
			}
		}
		if r != "" {
			m.source.WithLabelValues(m.policy(e.Policy).name, r).Inc()
		}
	case core.EventSync:
		if e.Err != nil {
			m.syncs.WithLabelValues("error").Inc()
			m.syncErrors.WithLabelValues(errorKinds[kindIndex(core.ClassifyError(e.Err))]).Inc()
		} else {
			m.syncs.WithLabelValues("ok").Inc()
		}
		if e.Keys > 0 {
			m.syncKeys.Add(float64(e.Keys))
		}
		if e.Latency > 0 {
			m.syncLatency.Observe(e.Latency.Seconds())
		}
	}
}

// tierBreaker records a transition of a breaker that serves every
// policy (the fleet tier's, one per Redis master): the state exported for
// a policy is 1 while any such breaker is open, else 2 while any is
// half-open, else 0, and each transition counts under every known policy.
func (m *Metrics) tierBreaker(from, to int) {
	m.tierSeen.Store(true)
	for st, n := range map[int]*atomic.Int64{breakerOpen: &m.tierOpen, breakerHalfOpen: &m.tierHalf} {
		if from == st && n.Load() > 0 {
			n.Add(-1)
		}
		if to == st {
			n.Add(1)
		}
	}
	for _, name := range m.knownPolicies() {
		p := m.policy(name)
		p.transitions[to].get(func() prometheus.Counter { return m.transitions.WithLabelValues(p.name, breakerStates[to]) }).Inc()
	}
}

// tierState is the aggregate state of the tier breakers.
func (m *Metrics) tierState() int {
	switch {
	case m.tierOpen.Load() > 0:
		return breakerOpen
	case m.tierHalf.Load() > 0:
		return breakerHalfOpen
	}
	return breakerClosed
}

// The breaker states a core.EventBreaker names, as the values of the
// breaker gauge.
const (
	breakerClosed = iota
	breakerOpen
	breakerHalfOpen
)

// breakerStates are the states' names (core.Event's From and To), by
// value.
var breakerStates = [...]string{breakerClosed: "closed", breakerOpen: "open", breakerHalfOpen: "half_open"}

// breakerIndex is the value of the state named s, or -1 for a name no
// state has.
func breakerIndex(s string) int {
	for i, n := range breakerStates {
		if n == s {
			return i
		}
	}
	return -1
}

// knownPolicies are the policy names seen in events or watched
// ([Metrics.WatchPolicy]).
func (m *Metrics) knownPolicies() []string {
	seen := map[string]bool{}
	var out []string
	for name := range *m.byName.Load() {
		seen[name] = true
		out = append(out, name)
	}
	m.policiesMu.Lock()
	for _, p := range m.policies {
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p.Name)
		}
	}
	m.policiesMu.Unlock()
	slices.Sort(out)
	return out
}

// WatchFleet says that the limiters' store is a fleet tier (core/fleet)
// reporting to m, so that the series the shipped dashboard and alerts
// read exist before the tier's first incident: from the next scrape on,
// limitkit_syncs_total{result="ok"|"error"} and
// limitkit_sync_errors_total{kind} are exported (at zero until a sync),
// and for every known policy (seen in an event, or given to
// WatchPolicy) limitkit_fallbacks_total and
// limitkit_deny_cache_hits_total (at zero) and
// limitkit_breaker_state, the state of the tier's breakers (1 while one
// is open, else 2 while one is half-open, else 0). Call it once, when the
// tier is built. A tier's breakers report no policy: without WatchFleet
// their state is exported under the known policies too, once they have
// changed, never under an empty policy label. Safe for concurrent use.
func (m *Metrics) WatchFleet() {
	m.fleet.Store(true)
	for _, r := range []string{"ok", "error"} {
		m.syncs.WithLabelValues(r)
	}
	for _, k := range baseKinds {
		m.syncErrors.WithLabelValues(k)
	}
}

// WatchMemstore exports s's key count and evictions under the label
// store=name at every scrape (Stats takes each shard's lock briefly): s is
// a *memstore.Store or a fleet tier (*fleet.Store), whose Stats are its
// local store's. name
// should be a constant such as "default"; watching the same name twice
// replaces the first, and a nil s stops watching name.
func (m *Metrics) WatchMemstore(name string, s interface{ Stats() memstore.Stats }) {
	m.storesMu.Lock()
	defer m.storesMu.Unlock()
	for i := range m.stores {
		if m.stores[i].name == name {
			if s == nil {
				m.stores = slices.Delete(m.stores, i, i+1)
			} else {
				m.stores[i].s = s
			}
			return
		}
	}
	if s != nil {
		m.stores = append(m.stores, watched{name, s})
	}
}

// WatchPolicy exports p's configured limits as the gauge
// limitkit_limit_requests{policy, limit, window}: Limits[i].Requests under
// limit="i" and window in seconds, so that a dashboard or an alert can set
// traffic against the limit. Call it once per policy, with the policy a
// limiter was built with (Limiter.Policy()); calling it again with the
// same name replaces the limits (a reloaded policy). The series count is
// the number of watched policies times their limits (at most 8 each); no
// key is a label. p is copied; it is not validated here.
func (m *Metrics) WatchPolicy(p core.Policy) {
	p.Limits = slices.Clone(p.Limits)
	m.policiesMu.Lock()
	defer m.policiesMu.Unlock()
	for i := range m.policies {
		if m.policies[i].Name == p.Name {
			m.policies[i] = p
			return
		}
	}
	m.policies = append(m.policies, p)
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.errors, m.latency, m.denyCache, m.fallbacks,
		m.breaker, m.inFlight, m.transitions, m.syncs, m.syncErrors, m.syncKeys, m.syncLatency, m.source}
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.memKeys
	ch <- m.memEvictions
	ch <- m.limit
}

// Collect implements [prometheus.Collector].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if m.fleet.Load() || m.tierSeen.Load() {
		st := float64(m.tierState())
		for _, name := range m.knownPolicies() {
			p := m.policy(name)
			if m.fleet.Load() {
				p.fallbacks.get(func() prometheus.Counter { return m.fallbacks.WithLabelValues(p.name) })
				p.denyCache.get(func() prometheus.Counter { return m.denyCache.WithLabelValues(p.name) })
			}
			p.breaker.get(func() prometheus.Gauge { return m.breaker.WithLabelValues(p.name) }).Set(st)
		}
	}
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	m.storesMu.Lock()
	stores := slices.Clone(m.stores)
	m.storesMu.Unlock()
	for _, w := range stores {
		st := w.s.Stats()
		ch <- prometheus.MustNewConstMetric(m.memKeys, prometheus.GaugeValue, float64(st.Keys), w.name)
		ch <- prometheus.MustNewConstMetric(m.memEvictions, prometheus.CounterValue, float64(st.Evictions), w.name)
	}
	m.policiesMu.Lock()
	policies := slices.Clone(m.policies)
	m.policiesMu.Unlock()
	for _, p := range policies {
		for i, l := range p.Limits {
			ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, float64(l.Requests),
				p.Name, strconv.Itoa(i), strconv.FormatFloat(l.Window.Seconds(), 'g', -1, 64))
		}
	}
}

var (
	_ core.Observer        = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)
