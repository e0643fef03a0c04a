package httplimit

import (
	"net/http"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit/internal/respond"
)

// Triple is the common response's header fields: the X-RateLimit triple
// and nothing else, as Fields would write them. Reset is the reset
// value's text when it is ready-made, else "" and ResetN is to be
// formatted.
type Triple struct {
	Limit     string
	Remaining int64
	Reset     string
	ResetN    int64
}

// Fields computes the header fields for res into f (which must be
// empty): what [Engine.SetHTTP] writes, for a framework without an
// http.Header.
func (e *Engine) Fields(res *Result, f *Fields) { e.fields(res, &f.f) }

// fields is Fields into the formatter's list, which SetHTTP writes.
func (e *Engine) fields(res *Result, f *respond.Fields) {
	if res.Action == Skip {
		return
	}
	d := &res.Decision
	hasLimit := res.decided && d.Limit.Requests > 0
	if e.cfg.headers&HeaderXRateLimit != 0 && hasLimit {
		if t := e.limitString(d.Limit.Requests); t != "" {
			f.AddStatic(respond.HeaderLimit, t)
		} else {
			f.AddInt(respond.HeaderLimit, d.Limit.Requests)
		}
		f.AddInt(respond.HeaderRemaining, d.Remaining)
		if e.cfg.resetDelta {
			f.AddInt(respond.HeaderReset, respond.CeilSeconds(d.ResetAfter))
		} else {
			now := res.now
			if now.IsZero() {
				now = e.cfg.clock.Now()
			}
			f.AddEpoch(respond.HeaderReset, respond.EpochSeconds(now, d.ResetAfter), now.Unix())
		}
	}
	retry, hasRetry := int64(0), false
	if res.Action == Deny && res.Reason != ReasonNoKey && res.Reason != ReasonRefused {
		retry, hasRetry = respond.RetryAfterSeconds(d.RetryAfter)
	}
	if hasRetry && e.cfg.headers&HeaderRetryAfter != 0 {
		f.AddInt(respond.HeaderRetryAfter, retry)
	}
	if e.cfg.headers&HeaderIETF != 0 {
		if res.chk != nil && res.chk.pf != "" {
			f.AddStatic(respond.HeaderPolicy, res.chk.pf)
		} else {
			f.AddStatic(respond.HeaderPolicy, e.policyField)
		}
		if hasLimit {
			t := respond.CeilSeconds(d.ResetAfter)
			if res.Action == Deny {
				t = -1
				if hasRetry {
					t = retry
				}
			}
			f.AddRateLimit(e.limitID(d), d.Remaining, t)
		}
	}
	if res.Degraded && e.cfg.degraded != "" {
		f.AddStatic(e.cfg.degraded, "1")
	}
}

// Triple writes res's header fields into *t and reports true when they
// are exactly the X-RateLimit triple (a pass with only those headers
// configured and a limit size the engine has text for), so that adapters
// can write them without building Fields; it reports false otherwise,
// leaving *t partly written. t is an out-parameter, not a result: the
// caller reads the fields where Triple stored them (BenchmarkTripleShapes
// measures what returning them as a struct would cost, ns:value-out).
func (e *Engine) Triple(res *Result, t *Triple) bool {
	lt, reset, resetN := e.triple(res)
	if lt == nil {
		return false
	}
	t.Limit, t.Remaining, t.Reset, t.ResetN = lt.s, res.Decision.Remaining, reset, resetN
	return true
}

// triple is Triple returning the limit's text as e.limitText's entry (nil
// for false), the reset's ready-made text or "" and the reset value, in
// registers: stores through a *Triple would each test the write barrier.
// Triple and SetHTTP's triple path both call it.
func (e *Engine) triple(res *Result) (lt *limitText, reset string, resetN int64) {
	if lt = e.tripleLimit(res); lt == nil {
		return nil, "", 0
	}
	d := &res.Decision
	if e.cfg.resetDelta {
		return lt, "", respond.CeilSeconds(d.ResetAfter)
	}
	now := res.now
	if now.IsZero() {
		now = e.cfg.clock.Now()
	}
	resetN = respond.EpochSeconds(now, d.ResetAfter)
	return lt, respond.EpochString(resetN, now.Unix()), resetN
}

// tripleLimit is the limit's entry when res's header fields are exactly
// the X-RateLimit triple (see Triple), else nil. It inlines into triple.
func (e *Engine) tripleLimit(res *Result) *limitText {
	d := &res.Decision
	if res.Action != Pass || !res.decided || d.Limit.Requests <= 0 ||
		e.cfg.headers&(HeaderXRateLimit|HeaderIETF) != HeaderXRateLimit || (res.Degraded && e.cfg.degraded != "") {
		return nil
	}
	return e.limitEntry(d.Limit.Requests)
}

// SetHTTP writes the header fields for res into h: what Fields, then
// respond.SetHTTP, write. The common response (see Triple) is written
// without building the Fields, and its values that many responses have
// in common (the limit, a reset instant, a small remaining count) are
// slices shared between responses, of capacity 1: code after the
// middleware replaces such a field (Header.Set, Add, Del), as net/http,
// gin and echo do, and never writes into its slice.
func (e *Engine) SetHTTP(res *Result, h http.Header) {
	if lt, reset, resetN := e.triple(res); lt != nil {
		respond.SetHTTPTriple(h, lt.vals, res.Decision.Remaining, reset, resetN)
		return
	}
	var f respond.Fields
	e.fields(res, &f)
	respond.SetHTTP(h, &f)
}

// limitString is the decimal form of limit size n, formatted at New, or
// "" for a size none of the checks has.
func (e *Engine) limitString(n int64) string {
	if lt := e.limitEntry(n); lt != nil {
		return lt.s
	}
	return ""
}

// limitEntry is limit size n's entry of e.limitText, or nil.
func (e *Engine) limitEntry(n int64) *limitText {
	for i := range e.limitText {
		if e.limitText[i].n == n {
			return &e.limitText[i]
		}
	}
	return nil
}

// limitID is the IETF identifier of d's binding limit.
func (e *Engine) limitID(d *core.Decision) string {
	for i := range e.checks {
		c := &e.checks[i]
		if c.policy.Name != d.Policy {
			continue
		}
		for j, l := range c.policy.Limits {
			if l == d.Limit {
				return c.ids[j]
			}
		}
	}
	if c := e.tierCheck(d.Policy); c != nil {
		for j, l := range c.policy.Limits {
			if l == d.Limit {
				return c.ids[j]
			}
		}
	}
	return d.Policy
}

// Reject describes a denial (res.Action == Deny).
func (e *Engine) Reject(res *Result) Rejection {
	r := Rejection{Reason: res.Reason, Decision: res.Decision}
	if res.Reason != ReasonNoKey && res.Reason != ReasonRefused {
		r.RetryAfter, _ = respond.RetryAfterSeconds(res.Decision.RetryAfter)
	}
	switch res.Reason {
	case ReasonUnavailable:
		r.Status, r.ContentType, r.Body = http.StatusServiceUnavailable, respond.ContentTypeProblem, e.unavailable
		return r
	case ReasonNoKey:
		// not a quota denial: neither the quota status nor a quota body
		r.Status, r.ContentType, r.Body = respond.NoKeyStatus, respond.ContentTypeProblem, e.noKeyBody
		return r
	case ReasonRefused:
		r.Status, r.ContentType, r.Body = int(res.refused), respond.ContentTypeProblem, respond.RefusedBody(int(res.refused), res.refusal)
		return r
	}
	r.Status = e.cfg.status
	if e.cfg.bodySet {
		r.ContentType, r.Body = e.cfg.bodyType, e.cfg.body
		return r
	}
	r.ContentType = respond.ContentTypeProblem
	r.Body = e.checks[0].body
	for i := range e.checks {
		if e.checks[i].policy.Name == res.Decision.Policy {
			r.Body = e.checks[i].body
			break
		}
	}
	if c := e.tierCheck(res.Decision.Policy); c != nil {
		r.Body = c.body
	}
	return r
}
