// Package otellimit exports what limitkit decides to OpenTelemetry: an
// [Observer] (a [core.Observer]) that records the same facts as the
// Prometheus metrics package as OTel instruments, and puts each decision
// on the request's trace span.
//
//	o, err := otellimit.New() // the global MeterProvider and TracerProvider
//	lim := core.MustNewLimiter(store, policy, core.WithObserver(o))
//	o.WatchPolicy(*lim.Policy())
//	d, err := lim.Allow(ctx, key) // a "limitkit.decision" event on ctx's span
//
// # Instruments
//
//	limitkit.decisions          counter    limitkit.policy, limitkit.result: allowed, denied, shadowed, elastic, degraded;
//	                                       limitkit.fail_mode on degraded: open, closed, local (the mode that decided);
//	                                       limitkit.deny_cache=true on a denial from the fleet tier's deny cache
//	limitkit.store.errors       counter    limitkit.policy, error.type: timeout, connection, circuit_open, canceled, other, reply kinds
//	limitkit.store.duration     histogram  s; limitkit.policy (stores that do I/O)
//	limitkit.deny_cache.hits    counter    limitkit.policy (fleet tier: denied from the deny cache; also counted denied)
//	limitkit.fallbacks          counter    limitkit.policy (fleet tier)
//	limitkit.breaker.state      gauge      limitkit.policy: 0 closed, 1 open, 2 half-open (fleet tier)
//	limitkit.syncs              counter    limitkit.sync.result: ok, error; error.type on errors (fleet tier)
//	limitkit.limit              gauge      {request}; limitkit.policy, limitkit.limit.index, limitkit.limit.window (s) (WatchPolicy)
//
// Only decisions are counted: a peek, a charge, a refund and a reset
// ([core.EventVerb]) are not, as in the Prometheus package.
//
// # Traces
//
// Every event of a request carries the request's context
// ([core.Event].Context); when its span is recording, Observe adds an
// event to it:
//
//	limitkit.decision        a decision (AllowN, WaitN's store calls)
//	limitkit.peek            a peek (cost 0, Peek)
//	limitkit.charge          Charge    limitkit.refund   Refund    limitkit.reset   Reset
//	limitkit.deny_cache_hit  the fleet tier denied from its deny cache (before the decision's event)
//	limitkit.fallback        the fleet tier decided locally (before the decision's event)
//
// with attributes limitkit.policy, limitkit.result (and limitkit.fail_mode
// when degraded, limitkit.deny_cache when cached), limitkit.remaining, limitkit.retry_after (seconds) and,
// on a store failure, error.type. Nothing is needed in the request path
// beyond passing the request's context to the Limiter, which every
// limitkit middleware does: a span started before the middleware (by
// otelhttp, otelgin, otelgrpc or your own) gets the decision.
// [WithoutSpanEvents] turns the span events off.
//
// # Keys
//
// Attributes are policy names, results and kinds, never keys: no event
// carries a key, which may be personal data (an IP address, a user id).
// A caller that wants to tell keys apart in traces opts in with
// [HashedKey]: a keyed hash of the key, set on the span where the key is
// known (the handler, or a middleware before limitkit's, with the same
// key function):
//
//	k, _ := keyFunc(keyfuncs.FromHTTP(r))
//	trace.SpanFromContext(r.Context()).SetAttributes(otellimit.HashedKey(secret, k))
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
// attribute sets built once per policy: no allocation for a request that
// is not traced (no span, or one not sampled). A recorded span event
// costs what the SDK's AddEvent costs. BenchmarkDecision compares a
// limiter with no observer, the Prometheus one and this one, with and
// without a sampled span.
package otellimit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// scopeName is the instrumentation scope of the Meter and Tracer.
const scopeName = "github.com/limitkit/limitkit/otellimit"

// maxPolicies caps the distinct limitkit.policy values; events of later
// policies are recorded under the policy "other".
const maxPolicies = 100

// otherPolicy is the limitkit.policy value beyond the first 100.
const otherPolicy = "other"

// errorKinds are core.ClassifyError's names of an error, the values of
// error.type: a policy's attribute sets are indexed by them.
var errorKinds = [...]string{"timeout", "connection", "circuit_open", "canceled", "tryagain", "clusterdown", "redirect", "readonly", "loading", "oom", "script", "other"}

// kindIndex is the index of kind k in errorKinds; a name it does not
// know counts as "other", so that the attribute stays bounded.
func kindIndex(k string) int {
	for i, s := range errorKinds {
		if s == k {
			return i
		}
	}
	return len(errorKinds) - 1
}

// The limitkit.result of a decision, as an index of policy.results.
const (
	allowed  = iota + 1 // admitted within the limit
	denied              // a limit is exhausted
	shadowed            // a Shadow policy would have denied; admitted
	degraded            // the store failed and a fail mode decided
	elastic             // admitted above the limits
	nResult
)

// resultNames are the limitkit.result values by index.
var resultNames = [nResult]string{allowed: "allowed", denied: "denied", shadowed: "shadowed", degraded: "degraded", elastic: "elastic"}

// breakerValues are the values of the breaker gauge by the state a
// core.EventBreaker names.
var breakerValues = map[string]int64{"closed": 0, "open": 1, "half_open": 2}

// The fail modes a degraded decision is attributed to (limitkit.fail_mode).
const (
	modeOpen = iota
	modeClosed
	modeLocal
	nMode
)

var modeNames = [nMode]string{"open", "closed", "local"}

// denyCacheAttr marks a decision a store tier took from its deny cache
// (core.Decision.Cached).
var denyCacheAttr = attribute.Bool("limitkit.deny_cache", true)

// failMode is the fail mode that decided a degraded decision: local when
// a local fallback decided (its divided limit is set, see
// core.Decision.Limit), else open or closed by the answer.
func failMode(d core.Decision) int {
	switch {
	case d.Limit != (core.Limit{}):
		return modeLocal
	case d.Allowed:
		return modeOpen
	}
	return modeClosed
}

// spanEventNames are the span events' names by event kind ("" for none).
var spanEventNames = [...]string{
	core.EventDecision:     "limitkit.decision",
	core.EventDenyCacheHit: "limitkit.deny_cache_hit",
	core.EventFallback:     "limitkit.fallback",
}

// verbEventName is the span event's name of a core.EventVerb of verb ("" for
// none).
func verbEventName(verb string) string {
	switch verb {
	case "peek":
		return "limitkit.peek"
	case "charge":
		return "limitkit.charge"
	case "refund":
		return "limitkit.refund"
	case "reset":
		return "limitkit.reset"
	}
	return ""
}

// Option configures [New].
type Option func(*config)

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	noSpans bool
}

// WithMeterProvider sets the MeterProvider (default otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the TracerProvider (default
// otel.GetTracerProvider()), as OTel instrumentations take one. The span
// events go to the span in each event's context, whichever provider
// started it, so the package starts no span of its own today: the
// provider only names its Tracer ("github.com/limitkit/limitkit/otellimit").
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithoutSpanEvents stops Observe from adding events to the request's
// span: metrics only.
func WithoutSpanEvents() Option { return func(c *config) { c.noSpans = true } }

// Observer is a [core.Observer] recording to OpenTelemetry instruments
// and to the span of each event's context. Build it with [New]; the zero
// value is not usable. Safe for concurrent use.
type Observer struct {
	tracer                             trace.Tracer
	spans                              bool
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
	name     string
	attrs    []metric.RecordOption
	add      []metric.AddOption
	results  [nResult][]metric.AddOption
	cached   [nResult][]metric.AddOption // results from a deny cache
	degraded [nMode][]metric.AddOption
	kinds    [len(errorKinds)][]metric.AddOption
	set      attribute.Set
	attr     attribute.KeyValue // limitkit.policy, for span events
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
	m := c.mp.Meter(scopeName)
	o := &Observer{tracer: c.tp.Tracer(scopeName), spans: !c.noSpans}
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
		"Decisions by policy and result: allowed, denied, shadowed, elastic, degraded (the store failed; limitkit.fail_mode decided).")
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
	pa := attribute.String("limitkit.policy", name)
	set := attribute.NewSet(pa)
	p := &policy{name: name, set: set, attr: pa,
		attrs: []metric.RecordOption{metric.WithAttributeSet(set)},
		add:   []metric.AddOption{metric.WithAttributeSet(set)}}
	for r := allowed; r < nResult; r++ {
		p.results[r] = []metric.AddOption{metric.WithAttributes(pa, attribute.String("limitkit.result", resultNames[r]))}
		p.cached[r] = []metric.AddOption{metric.WithAttributes(pa, attribute.String("limitkit.result", resultNames[r]), denyCacheAttr)}
	}
	for m := range nMode {
		p.degraded[m] = []metric.AddOption{metric.WithAttributes(pa, attribute.String("limitkit.result", "degraded"),
			attribute.String("limitkit.fail_mode", modeNames[m]))}
	}
	for i, k := range errorKinds {
		p.kinds[i] = []metric.AddOption{metric.WithAttributes(pa, attribute.String("error.type", k))}
	}
	return p
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
	if len(old) >= maxPolicies {
		if p := old[otherPolicy]; p != nil {
			return p
		}
		name = otherPolicy
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

// resultOf classifies d: degraded first, then shadowed, elastic,
// allowed, denied.
func resultOf(d *core.Decision) int {
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

// Observe records e and, when e's context holds a recording span, adds
// the event to it (see the package doc). It implements [core.Observer].
func (o *Observer) Observe(e core.Event) {
	// The request's context, when there is one, lets an SDK that keeps
	// exemplars link the measurement to the request's trace.
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	switch e.Kind {
	case core.EventDecision:
		p := o.policy(e.Policy)
		if r := resultOf(&e.Decision); r == degraded {
			o.decisions.Add(ctx, 1, p.degraded[failMode(e.Decision)]...)
		} else if e.Decision.Cached {
			o.decisions.Add(ctx, 1, p.cached[r]...)
		} else {
			o.decisions.Add(ctx, 1, p.results[r]...)
		}
		if e.Latency > 0 {
			o.latency.Record(ctx, e.Latency.Seconds(), p.attrs...)
		}
		if e.Err != nil {
			o.errs.Add(ctx, 1, p.kinds[kindIndex(core.ClassifyError(e.Err))]...)
		}
	case core.EventDenyCacheHit:
		o.denyHits.Add(ctx, 1, o.policy(e.Policy).add...)
	case core.EventFallback:
		o.fallbks.Add(ctx, 1, o.policy(e.Policy).add...)
	case core.EventBreaker:
		if st, ok := breakerValues[e.To]; ok {
			o.breaker.Record(ctx, st, o.policy(e.Policy).attrs...)
		}
	case core.EventSync:
		if e.Err == nil {
			o.syncs.Add(ctx, 1, o.syncOK...)
		} else {
			o.syncs.Add(ctx, 1, metric.WithAttributes(attribute.String("limitkit.sync.result", "error"),
				attribute.String("error.type", errorKinds[kindIndex(core.ClassifyError(e.Err))])))
		}
	}
	if o.spans && e.Context != nil {
		o.spanEvent(e.Context, e.Kind, e.Verb, e.Policy, e.Decision, e.Err)
	}
}

// spanEvent adds the event of kind to ctx's span when it is recording.
func (o *Observer) spanEvent(ctx context.Context, kind core.EventKind, verb, name string, d core.Decision, err error) {
	event := verbEventName(verb)
	if kind != core.EventVerb {
		event = ""
		if int(kind) < len(spanEventNames) {
			event = spanEventNames[kind]
		}
	}
	if event == "" {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 1, 7)
	attrs[0] = o.policy(name).attr
	if verb != "reset" {
		r := resultOf(&d)
		attrs = append(attrs, attribute.String("limitkit.result", resultNames[r]))
		if r == degraded {
			attrs = append(attrs, attribute.String("limitkit.fail_mode", modeNames[failMode(d)]))
		}
		if d.Cached {
			attrs = append(attrs, denyCacheAttr)
		}
		attrs = append(attrs, attribute.Int64("limitkit.remaining", d.Remaining),
			attribute.Float64("limitkit.retry_after", d.RetryAfter.Seconds()))
	}
	if err != nil {
		attrs = append(attrs, attribute.String("error.type", errorKinds[kindIndex(core.ClassifyError(err))]))
	}
	span.AddEvent(event, trace.WithAttributes(attrs...))
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

// hashedKeyAttribute is the attribute key of [HashedKey].
const hashedKeyAttribute = "limitkit.key.hash"

// HashedKey returns the attribute limitkit.key.hash: the first 16 bytes
// of HMAC-SHA256(secret, key) in hex, the opt-in way to tell keys apart
// in traces without recording them (see the package doc). secret should
// be a random value of the deployment, kept out of the traces: with a
// known or empty secret, a key from a small space (an IPv4 address, a
// numeric id) is found again by hashing every candidate. The same key
// and secret always give the same value.
func HashedKey(secret []byte, key string) attribute.KeyValue {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(key))
	var sum [sha256.Size]byte
	return attribute.String(hashedKeyAttribute, hex.EncodeToString(m.Sum(sum[:0])[:16]))
}

var _ core.Observer = (*Observer)(nil)
