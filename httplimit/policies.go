package httplimit

import (
	"maps"
	"slices"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
)

// WithTiers chooses the limiter of each request by its tier (its plan):
// tier reads the tier from the request — a verified JWT claim
// (keyfuncs.JWTClaim with Claim "plan", or keyfuncs.ClaimFromContext
// behind an auth middleware) or a header a trusted component sets — and a
// request whose tier is one of tiers' names is decided by that limiter;
// any other request (no tier: tier returned an error or ""; an unknown
// tier) by the limiter passed to New, the default. The checks added with
// [WithCheck] apply to every tier.
//
// Every limiter must have its own policy name ([core.NewTiers] checks it,
// and New fails otherwise): stores keep state by policy name, so the
// counters of two tiers never mix, and a user who upgrades from free to
// pro starts on pro's quota, full. The tier never enters a store key: a
// client can reach at most the configured tiers (at most
// 16, as core.NewTiers). Trust matters: a client that sets its own tier header
// picks its own plan, so read the tier from a verified claim unless a
// proxy you control sets the header. The headers and the denial describe
// the chosen tier's policy. tiers is copied.
func WithTiers(tier keyfuncs.Func, tiers map[string]*core.Limiter) Option {
	return func(c *config) {
		if tier == nil {
			c.fail("WithTiers(nil, ...): pass the key function that reads the tier, e.g. keyfuncs.JWTClaim with Claim \"plan\"")
			return
		}
		c.pol.tier, c.pol.tiers = tier, maps.Clone(tiers)
	}
}

// WithOverrides gives individual clients their own limiter: a request
// whose client is one of overrides' keys is decided by that limiter,
// whatever its tier. Use it for a named customer's contract (its API key
// gets 50,000 a minute). A key names the client as it sends itself — the
// API key as presented, "k_bigcustomer", which the middleware hashes as
// its key function does (keyfuncs.APIKey's SHA-256 or HMAC: the key
// function is run once per override, at construction, on a request
// presenting the key in every header and query parameter) — or as its
// client key, what New's key function ([WithKey]) returns for it as it
// enters the store key (longer than 256 bytes: hashed by keyfuncs.Bound).
// An override of an IP key names the client key (the address, or an IPv6
// client's prefix "2001:db8::/64"). Each limiter
// must have its own policy name, as for [WithTiers]; at most
// 1024, as core.NewTiers. Keys from the fallback key function never match.
// overrides is copied.
func WithOverrides(overrides map[string]*core.Limiter) Option {
	return func(c *config) { c.pol.overrides = maps.Clone(overrides) }
}

// Outcome configures counting by outcome, for [WithOutcome].
type Outcome struct {
	// Count reports whether a response with this status counts against
	// the quota (only failed logins: [StatusIn](401); every failure:
	// func(s int) bool { return s >= 400 }). Required.
	Count func(status int) bool
	// ResetOnSuccess makes a response that does not count and whose
	// status is below 400 reset the client's count under New's limiter
	// (core.Limiter.Reset: a successful login clears the username's
	// failures). The [WithCheck] checks are never reset: a success must
	// not clear the per-IP count an attacker spreads over many usernames.
	ResetOnSuccess bool
	// ChargeFirst consumes the quota at the decision, as without
	// WithOutcome, and refunds it (core.Limiter.Refund) when the response
	// does not count: exact under concurrency (never more than the limit
	// admitted), but a client at its limit is denied until its requests in
	// flight have answered, even those that will not count. The default
	// (false) peeks before the handler and charges after the response;
	// see [WithOutcome].
	ChargeFirst bool
}

// WithOutcome counts only the requests whose response o.Count accepts,
// as login throttling needs (count failed logins, not successful ones).
// A client already over its limit is denied before the handler runs; the
// others run, and once the response is written its status decides: a
// counting response is charged (core.Limiter.Charge, on every check, with
// the request's cost), another is not, and with o.ResetOnSuccess a
// success resets the client's count.
//
// The concurrency bound: with the default (peek, then charge), the check
// before the handler consumes nothing, so N requests of one client in
// flight at once may all pass before the first failure is charged — a
// client at limit−1 can get N more failures through, and then owes them
// (Charge goes past the limit, and the client waits the debt out). Where
// that matters, set o.ChargeFirst: the quota is taken first and given back
// (core.Limiter.Refund) when the response does not count, which admits at
// most the limit at any moment.
//
// The rate-limit headers are those of the check before the handler
// (Remaining as if this request will count). Every limiter's store must
// implement the quota verbs (memstore, redisstore, the fleet tier), or New
// fails. A denial (429, 403, 503) written by the middleware itself is
// never counted. Adapters read the status after the handler: net/http's
// from a wrapped ResponseWriter (the first status of 200 or more, or 101
// Switching Protocols; a Write or Flush before any status is 200; the wrapper implements Flush and
// Unwrap, so http.ResponseController reaches the connection's writer, but
// a handler that type-asserts http.Hijacker on w directly must use the
// ResponseController), gin's c.Writer.Status(), echo's response status or
// the returned *echo.HTTPError's code (500 for another error), fiber's
// response status or the returned *fiber.Error's code.
//
// Counting by outcome fails safe: a handler that panicked
// ([OutcomePanic]; the panic goes on unchanged), one that wrote no status
// ([OutcomeUnwritten]) and a request whose context had ended when the
// handler returned (the client went away, whatever was written; the
// engine finds it from the request's context) are each a counted failure, charged whatever o.Count says and
// never a success. docs/policies.md tabulates every outcome for each
// adapter.
func WithOutcome(o Outcome) Option {
	return func(c *config) {
		if o.Count == nil {
			c.fail("WithOutcome: Outcome.Count is nil; pass which statuses count, e.g. httplimit.StatusIn(401)")
			return
		}
		c.pol.setOutcome(o)
		c.pol.byStatus = true
	}
}

// adapterOutcome is AdapterOption's Outcome form (see there): o.Count
// is the value of adapter's option name.
func adapterOutcome(adapter, name string, o Outcome) Option {
	return func(c *config) {
		if o.Count == nil {
			c.fail("%s.%s: Outcome.Count is nil; pass which outcomes count", adapter, name)
			return
		}
		c.setAdapterValue(adapter, name, o.Count).outcome = true
		c.pol.setOutcome(o)
		c.pol.byAdapter = adapter + "." + name
	}
}

// policySpec is what WithTiers, WithOverrides and WithOutcome set, read
// by the engine's initPolicies (policies_engine.go). The zero value: none
// of them.
type policySpec struct {
	tier           keyfuncs.Func
	tiers          map[string]*core.Limiter
	overrides      map[string]*core.Limiter
	count          func(status int) bool
	resetOnSuccess bool
	chargeFirst    bool
	byStatus       bool          // WithOutcome was given
	byAdapter      string        // an AdapterOption of an Outcome was given: its adapter.name
	source         *core.Sourced // WithLimitSource (source.go)
}

func (p *policySpec) setOutcome(o Outcome) {
	p.count, p.resetOnSuccess, p.chargeFirst = o.Count, o.ResetOnSuccess, o.ChargeFirst
}

// StatusIn returns an [Outcome] Count that accepts exactly the given
// statuses (StatusIn(401): failed logins).
func StatusIn(codes ...int) func(status int) bool {
	codes = slices.Clone(codes)
	return func(status int) bool { return slices.Contains(codes, status) }
}
