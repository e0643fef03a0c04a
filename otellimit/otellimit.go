// Package otellimit exports what limitkit decides to OpenTelemetry: an
// [Observer] (a [core.Observer]) that records the same facts as the
// Prometheus metrics package as OTel instruments, and
// [Observer.RecordDecision], which puts a decision on the request's span.
//
//	o, err := otellimit.New() // the global MeterProvider and TracerProvider
//	lim := core.MustNewLimiter(store, policy, core.WithObserver(o))
//	o.WatchPolicy(*lim.Policy())
//	d, err := lim.Allow(ctx, key)
//	o.RecordDecision(ctx, d) // a "limitkit.decision" event on the current span
//
// # Instruments
//
//	limitkit.decisions          counter    limitkit.policy, limitkit.result: allowed, denied, shadowed, elastic, degraded
//	limitkit.store.errors       counter    limitkit.policy, error.type: timeout, connection, circuit_open, canceled, other, reply kinds
//	limitkit.store.duration     histogram  s; limitkit.policy (stores that do I/O)
//	limitkit.deny_cache.hits    counter    limitkit.policy (fleet tier)
//	limitkit.fallbacks          counter    limitkit.policy (fleet tier)
//	limitkit.breaker.state      gauge      limitkit.policy: 0 closed, 1 open, 2 half-open (fleet tier)
//	limitkit.syncs              counter    limitkit.sync.result: ok, error; error.type on errors (fleet tier)
//	limitkit.limit              gauge      {request}; limitkit.policy, limitkit.limit.index, limitkit.limit.window (s) (WatchPolicy)
//
// Attributes are policy names, results and kinds, never keys: no event
// carries a key. RecordDecision does not record the key either; a caller
// that wants to tell keys apart in traces opts in by adding an attribute
// of its own, such as a salted hash of the key (never the raw key, which
// may be personal data).
//
// # Dependencies
//
// This package is in limitkit's module rather than a module of its own:
// it imports only the OTel API (go.opentelemetry.io/otel, otel/metric,
// otel/trace), 27 non-standard packages in `go list -deps` against 58 for
// the metrics package's client_golang, and a program that does not import
// it links none of them. The SDK is a test dependency only.
//
// # Cost
//
// Observe looks a policy up in a map and adds to instruments with
// attribute sets built once per policy; BenchmarkDecision compares a
// limiter with and without an Observer.
package otellimit

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitkit/limitkit/core"
)

// ScopeName is the instrumentation scope of the Meter and Tracer.
const ScopeName = "github.com/limitkit/limitkit/otellimit"

// MaxPolicies caps the distinct limitkit.policy values; events of later
// policies are recorded under [OtherPolicy].
const MaxPolicies = 100

// OtherPolicy is the limitkit.policy value beyond [MaxPolicies].
const OtherPolicy = "other"

const (
	elastic = core.OutcomeDegraded + 1 // the elastic result's index
	nResult = elastic + 1
	nKind   = core.ErrorOther + 1
)

// Option configures [New].
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the MeterProvider (default otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the TracerProvider (default
// otel.GetTracerProvider()). RecordDecision uses the span in its context;
// the provider is kept for future spans of the package's own.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// Observer is a [core.Observer] recording to OpenTelemetry instruments.
// Build it with [New]; the zero value is not usable. Safe for concurrent
// use.
type Observer struct {
	tracer                             trace.Tracer
	decisions, errs, denyHits, fallbks metric.Int64Counter
	syncs                              metric.Int64Counter
	latency                            metric.Float64Histogram
	breaker, limit                     metric.Int64Gauge

	byName atomic.Pointer[map[string]*policy]
	mu     sync.Mutex
	syncOK []metric.AddOption
}

// policy holds the attribute options of one policy, built once.
type policy struct {
	name    string
	attrs   []metric.RecordOption
	add     []metric.AddOption
	results [nResult][]metric.AddOption
	kinds   [nKind][]metric.AddOption
	set     attribute.Set
}

// New returns an Observer over the configured providers. It fails when an
// instrument cannot be created or an Option is nil.
func New(opts ...Option) (*Observer, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("otellimit: New: nil Option")
		}
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName)}
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		i, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return i
	}
	gauge := func(name, unit, desc string) metric.Int64Gauge {
		i, e := m.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return i
	}
	o.decisions = counter("limitkit.decisions", "{decision}",
		"Decisions by policy and result: allowed, denied, shadowed, elastic, degraded (the store failed; the fail mode decided).")
	o.errs = counter("limitkit.store.errors", "{error}", "Store failures by policy and kind; each one is a degraded decision.")
	o.denyHits = counter("limitkit.deny_cache.hits", "{decision}", "Decisions a store tier denied from its local deny cache.")
	o.fallbks = counter("limitkit.fallbacks", "{decision}", "Decisions a store tier made locally because the remote store failed.")
	o.syncs = counter("limitkit.syncs", "{sync}", "Round trips of a store tier's write-back sync, by result and error kind.")
	o.breaker = gauge("limitkit.breaker.state", "1", "State of a store tier's circuit breaker: 0 closed, 1 open, 2 half-open.")
	o.limit = gauge("limitkit.limit", "{request}", "Configured limits (WatchPolicy): requests a key may spend per window.")
	var e error
	o.latency, e = m.Float64Histogram("limitkit.store.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the store call of each decision, for stores that do I/O."),
		metric.WithExplicitBucketBoundaries(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25))
	if err = errors.Join(err, e); err != nil {
		return nil, err
	}
	o.syncOK = []metric.AddOption{metric.WithAttributes(attribute.String("limitkit.sync.result", "ok"))}
	empty := map[string]*policy{}
	o.byName.Store(&empty)
	return o, nil
}

func newPolicy(name string) *policy {
	set := attribute.NewSet(attribute.String("limitkit.policy", name))
	p := &policy{name: name, set: set,
		attrs: []metric.RecordOption{metric.WithAttributeSet(set)},
		add:   []metric.AddOption{metric.WithAttributeSet(set)}}
	for r := core.OutcomeAllowed; r < nResult; r++ {
		p.results[r] = []metric.AddOption{metric.WithAttributes(attribute.String("limitkit.policy", name), attribute.String("limitkit.result", result(r)))}
	}
	for k := core.ErrorTimeout; k < nKind; k++ {
		p.kinds[k] = []metric.AddOption{metric.WithAttributes(attribute.String("limitkit.policy", name), attribute.String("error.type", k.String()))}
	}
	return p
}

func result(o core.Outcome) string {
	if o == elastic {
		return "elastic"
	}
	return o.String()
}

func (o *Observer) policy(name string) *policy {
	if p := (*o.byName.Load())[name]; p != nil {
		return p
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.byName.Load()
	if p := old[name]; p != nil {
		return p
	}
	if len(old) >= MaxPolicies {
		if p := old[OtherPolicy]; p != nil {
			return p
		}
		name = OtherPolicy
	}
	next := make(map[string]*policy, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	p := newPolicy(name)
	next[name] = p
	o.byName.Store(&next)
	return p
}

func resultOf(e core.Event) core.Outcome {
	if e.Outcome == core.OutcomeAllowed && e.Decision.Elastic {
		return elastic
	}
	return e.Outcome
}

// Observe records e. It implements [core.Observer].
func (o *Observer) Observe(e core.Event) {
	ctx := context.Background()
	switch e.Kind {
	case core.EventDecision:
		p := o.policy(e.Policy)
		if r := resultOf(e); r > 0 && r < nResult {
			o.decisions.Add(ctx, 1, p.results[r]...)
		}
		if e.Latency > 0 {
			o.latency.Record(ctx, e.Latency.Seconds(), p.attrs...)
		}
		if e.Err != nil {
			if k := core.ClassifyError(e.Err); k > 0 && k < nKind {
				o.errs.Add(ctx, 1, p.kinds[k]...)
			}
		}
	case core.EventDenyCacheHit:
		o.denyHits.Add(ctx, 1, o.policy(e.Policy).add...)
	case core.EventFallback:
		o.fallbks.Add(ctx, 1, o.policy(e.Policy).add...)
	case core.EventBreaker:
		o.breaker.Record(ctx, int64(e.To), o.policy(e.Policy).attrs...)
	case core.EventSync:
		if e.Err == nil {
			o.syncs.Add(ctx, 1, o.syncOK...)
		} else {
			o.syncs.Add(ctx, 1, metric.WithAttributes(attribute.String("limitkit.sync.result", "error"),
				attribute.String("error.type", core.ClassifyError(e.Err).String())))
		}
	}
}

// WatchPolicy records p's configured limits on the limitkit.limit gauge,
// one point per limit (attributes policy, index, window in seconds). Call
// it again after a reload.
func (o *Observer) WatchPolicy(p core.Policy) {
	for i, l := range p.Limits {
		o.limit.Record(context.Background(), l.Requests, metric.WithAttributes(
			attribute.String("limitkit.policy", p.Name), attribute.Int("limitkit.limit.index", i),
			attribute.String("limitkit.limit.window", strconv.FormatFloat(l.Window.Seconds(), 'g', -1, 64))))
	}
}

// RecordDecision adds a "limitkit.decision" event to the span in ctx (none
// when ctx carries no recording span) with the decision's policy, result,
// remaining quota and retry-after. It never records the key.
func (o *Observer) RecordDecision(ctx context.Context, d core.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	r := core.OutcomeOf(d)
	if r == core.OutcomeAllowed && d.Elastic {
		r = elastic
	}
	span.AddEvent("limitkit.decision", trace.WithAttributes(
		attribute.String("limitkit.policy", d.Policy),
		attribute.String("limitkit.result", result(r)),
		attribute.Int64("limitkit.remaining", d.Remaining),
		attribute.Float64("limitkit.retry_after", d.RetryAfter.Seconds())))
}

var _ core.Observer = (*Observer)(nil)
