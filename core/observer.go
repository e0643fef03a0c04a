package core

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// Observer receives what a [Limiter] decides and, from a store tier such
// as the fleet tier, what the tier does (deny-cache hits, syncs, breaker
// state). The metrics package exports it to Prometheus; a test can count
// events with an [ObserverFunc].
//
// Observe is called synchronously on the request path, once per event, so
// it must be cheap, must not block, and must be safe for concurrent use.
// The Event is passed by value and never retained by core, so an
// implementation that does not let it escape allocates nothing. Labels an
// implementation derives must be bounded: Event.Policy is a policy name
// (configuration), never a client key; no event carries a key.
//
// An event of a request carries the request's context (Event.Context): an
// exporter finds the request's trace span in it (the otellimit package
// adds the decision to that span). Carrying it costs no allocation: the
// context is the one the caller passed, not a copy.
//
// Only [EventDecision] is a decision to count as allowed or denied. What
// each [Limiter] method reports:
//
//	AllowN, Allow, AllowNAt (cost > 0)   EventDecision
//	AllowN with cost 0, Peek, PeekN      EventVerb, Verb "peek"
//	PeekDecision                         EventDecision (a peek that decides a request
//	                                     counted by outcome; consumes nothing)
//	Charge                               EventVerb, Verb "charge"
//	Refund                               EventVerb, Verb "refund"
//	Reset                                EventVerb, Verb "reset"
//	WaitN, Wait                          EventDecision per store call (a denied call, then the
//	                                     admitting one; a reservation is one admitting call)
//	AllowAll                             its checks' events, as AllowN's
//
// A limiter that fails before calling the store (a negative cost, a store
// without the verb) reports nothing. WaitN's best-effort refund of a
// reservation its context interrupted is not reported.
//
// A Limiter without an observer (the default) pays nothing for this.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	// EventDecision: a Limiter decided (Decision; Latency and Err for
	// stores that do I/O). An exporter classifies the Decision by its
	// flags, in this order: Degraded (the store failed and a fail mode
	// decided; Allowed says which way), Shadowed (a Shadow policy would
	// have denied; admitted), Allowed, else denied.
	EventDecision EventKind = iota + 1
	// EventDenyCacheHit: a store tier denied from its local deny cache
	// without calling the remote store.
	EventDenyCacheHit
	// EventSync: a store tier synced with the remote store: Keys entries in
	// one round trip of Latency; Err when it failed.
	EventSync
	// EventBreaker: a store tier's circuit breaker changed state From → To.
	EventBreaker
	// EventFallback: a store tier decided locally because the remote store
	// failed or its breaker was open (the Decision is Degraded).
	EventFallback
	// EventVerb: a Limiter answered the quota verb Event.Verb names, and
	// it is not a decision to count as allowed or denied: "peek" (a cost
	// of 0, see Limiter.AllowN; Limiter.PeekN): the Decision reports the
	// key's state, nothing was consumed; "charge" (Limiter.Charge
	// consumed quota for work already done) and "refund"
	// (Limiter.Refund returned quota): the Decision reports the key
	// afterwards, as the verb returns it; "reset" (Limiter.Reset forgot
	// the key's state): the Decision is zero. Err and Latency are set as
	// for a decision.
	EventVerb
	// EventSource: a [Sourced] did what Event.Source names: "hit", it
	// answered an identity from its cache; "lookup", it asked its
	// [LimitSource] (one lookup, whatever the requests waiting for it):
	// Keys is the number of limits found (0: not found), Latency the
	// call's duration, Err the source's error (context.DeadlineExceeded
	// past the lookup's Timeout) or nil; "fallback", a request was
	// decided by the fallback (see SourceConfig.FailModeOnError) because
	// the lookup failed (or one failed less than a second ago), timed
	// out (Err context.DeadlineExceeded), its context ended, or too many
	// lookups were under way.
	EventSource
	// EventInFlight: a [Concurrency] took (Keys 1) or gave back (Keys -1)
	// a slot of its Policy. Only the change is reported: an exporter sums
	// them into a gauge of the slots this process holds. Not a decision.
	EventInFlight
)

// String returns "decision", "deny_cache_hit", "sync", "breaker",
// "fallback", "verb", "source" or "in_flight".
func (k EventKind) String() string {
	switch k {
	case EventDecision:
		return "decision"
	case EventDenyCacheHit:
		return "deny_cache_hit"
	case EventSync:
		return "sync"
	case EventBreaker:
		return "breaker"
	case EventFallback:
		return "fallback"
	case EventVerb:
		return "verb"
	case EventSource:
		return "source"
	case EventInFlight:
		return "in_flight"
	}
	return "unknown"
}

// Event is one observation. Which fields are set depends on Kind; the
// others are zero.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Context is the context of the request the event belongs to, as the
	// caller passed it to the Limiter (or, from a store tier, as the
	// Limiter passed it to the store: the caller's, with the store
	// deadline): exporters read the request's trace span from it. It is
	// set on the events of a request (EventDecision, EventVerb,
	// EventDenyCacheHit, EventFallback) and nil on those of no request (EventSync,
	// EventBreaker). Valid during Observe only: an observer must not keep
	// it, nor wait on it.
	Context context.Context
	// Policy is the policy's name ("" for a sync that spans policies).
	Policy string
	// Decision is the decision (EventDecision, EventDenyCacheHit,
	// EventFallback), or the key's state a verb reports (EventVerb but
	// "reset").
	Decision Decision
	// Latency is the store call's duration (EventDecision and the verbs'
	// events, for stores that do I/O; 0 for the embedded store, which is
	// not timed) or the sync round trip (EventSync).
	Latency time.Duration
	// Err is the store's error (EventDecision, the verbs' events,
	// EventFallback, EventSync), or nil.
	Err error
	// Keys is the number of entries of a sync (EventSync), or of the
	// limits a source found (an EventSource lookup).
	Keys int
	// Verb is the quota verb of an EventVerb: "peek", "charge", "refund"
	// or "reset".
	Verb string
	// Source is what a [Sourced] did (EventSource): "hit", "lookup" or
	// "fallback".
	Source string
	// From and To are the breaker's previous and new state
	// (EventBreaker): "closed" (calls go to the remote store), "open"
	// (the remote store is not called; the fail mode decides) or
	// "half_open" (one probe call is let through; its outcome closes or
	// reopens the breaker).
	From, To string
}

// errorKind classifies a store error for metrics and logs.
type errorKind uint8

const (
	// kindNone: no error.
	kindNone errorKind = iota
	// kindTimeout: the deadline passed (a hung or overloaded store).
	kindTimeout
	// kindConnection: the store could not be reached (refused, reset,
	// closed, DNS).
	kindConnection
	// kindCircuitOpen: a circuit breaker refused the call without trying.
	kindCircuitOpen
	// kindCanceled: the caller's context was cancelled (the client went
	// away) or its own deadline passed before the store answered
	// ([ErrCallerDone]); not a fault of the store.
	kindCanceled
	// kindTryAgain: the store asked to retry later (Redis TRYAGAIN: a
	// multi-key call during a slot migration).
	kindTryAgain
	// kindClusterDown: the store cannot serve the key's part of the data
	// now (Redis CLUSTERDOWN, MASTERDOWN: a failover in progress).
	kindClusterDown
	// kindRedirect: the key lives elsewhere and the client did not follow
	// (Redis MOVED or ASK beyond the client's redirect limit).
	kindRedirect
	// kindReadOnly: the store refused a write (Redis READONLY: a replica,
	// e.g. a demoted master the client still sends to).
	kindReadOnly
	// kindLoading: the store is loading its data after a start (Redis
	// LOADING).
	kindLoading
	// kindOOM: the store is out of memory and refuses writes (Redis OOM
	// under maxmemory with noeviction). The store answers: not an outage.
	kindOOM
	// kindScript: the store's script failed (a Redis script error); a
	// bug or an incompatible server, not an outage.
	kindScript
	// kindOther: anything else (a bad reply, a closed store, an error
	// reply of no other kind).
	kindOther
)

// kindError is implemented by a store error that knows its kind, such as
// a Redis store's error for a Redis error reply (TRYAGAIN, OOM, ...):
// ErrorKind returns one of [ClassifyError]'s names. ClassifyError asks it,
// so stores classify what only they can parse without core importing
// their client.
type kindError interface {
	error
	ErrorKind() string
}

// parseKind returns the kind named s (a [kindError]'s answer), or
// kindOther for a name it does not know.
func parseKind(s string) errorKind {
	for k := kindTimeout; k < kindOther; k++ {
		if k.String() == s {
			return k
		}
	}
	return kindOther
}

// String returns "", "timeout", "connection", "circuit_open", "canceled",
// "tryagain", "clusterdown", "redirect", "readonly", "loading", "oom",
// "script" or "other".
func (k errorKind) String() string {
	switch k {
	case kindNone:
		return ""
	case kindTimeout:
		return "timeout"
	case kindConnection:
		return "connection"
	case kindCircuitOpen:
		return "circuit_open"
	case kindCanceled:
		return "canceled"
	case kindTryAgain:
		return "tryagain"
	case kindClusterDown:
		return "clusterdown"
	case kindRedirect:
		return "redirect"
	case kindReadOnly:
		return "readonly"
	case kindLoading:
		return "loading"
	case kindOOM:
		return "oom"
	case kindScript:
		return "script"
	}
	return "other"
}

// ErrCircuitOpen is returned (wrapped) by a store tier whose circuit
// breaker is open: the remote store was not called.
var ErrCircuitOpen = errors.New("limitkit: circuit breaker open; remote store not called")

// ClassifyError names the kind of a store error, the label the metrics,
// the OpenTelemetry attributes and the logs use:
//
//   - "" for a nil error;
//   - "timeout": the deadline passed (a context deadline, a net.Error
//     timeout: a hung or overloaded store);
//   - "connection": the store could not be reached (refused, reset,
//     broken pipe, EOF, a *net.OpError, DNS);
//   - "circuit_open": a circuit breaker refused the call without trying
//     ([ErrCircuitOpen]);
//   - "canceled": the caller's context was cancelled (the client went
//     away) or its own deadline passed before the store answered
//     ([ErrCallerDone]); not a fault of the store;
//   - a store's error reply, named by the store: an error in err's chain
//     with a method ErrorKind() string gives its answer, one of
//     "tryagain" (Redis TRYAGAIN: a multi-key call during a slot
//     migration), "clusterdown" (CLUSTERDOWN, MASTERDOWN: a failover in
//     progress), "redirect" (MOVED or ASK beyond the client's redirect
//     limit), "readonly" (READONLY: a write sent to a replica), "loading"
//     (LOADING: the store is loading its data after a start), "oom" (OOM
//     under maxmemory with noeviction: the store answers, not an outage)
//     or "script" (a script error: a bug or an incompatible server);
//     another answer counts as "other";
//   - "other": anything else (a bad reply, a closed store).
//
// A deadline or a cancellation anywhere in the chain wins over a reply's
// kind: the store did not answer in time, whatever its last reply was.
func ClassifyError(err error) string { return classify(err).String() }

// classify is [ClassifyError]'s kind as a number.
func classify(err error) errorKind {
	if err == nil {
		return kindNone
	}
	if errors.Is(err, ErrCircuitOpen) {
		return kindCircuitOpen
	}
	if errors.Is(err, ErrCallerDone) {
		return kindCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return kindTimeout
	}
	if errors.Is(err, context.Canceled) {
		return kindCanceled
	}
	var ke kindError
	if errors.As(err, &ke) {
		return parseKind(ke.ErrorKind())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return kindTimeout
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return kindConnection
	}
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &oe) || errors.As(err, &de) {
		return kindConnection
	}
	return kindOther
}
