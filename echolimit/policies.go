// The options of issue 26's policies, shared verbatim by nethttp,
// ginlimit, echolimit and fiberlimit (only the package clause differs);
// their full documentation is httplimit's.

package echolimit

import (
	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Outcome configures counting by outcome, for [WithOutcome]; it is
// [httplimit.Outcome].
type Outcome = httplimit.Outcome

// WithTiers chooses the limiter of each request by its tier (a verified
// claim such as "plan", a trusted header): tiers' limiter for a known
// tier, New's limiter otherwise; tiers' counters never mix. See
// [httplimit.WithTiers].
func WithTiers(tier keyfuncs.Func, tiers map[string]*core.Limiter) Option {
	return httplimit.WithTiers(tier, tiers)
}

// WithOverrides gives individual client keys their own limiter; see
// [httplimit.WithOverrides].
func WithOverrides(overrides map[string]*core.Limiter) Option {
	return httplimit.WithOverrides(overrides)
}

// WithOutcome counts only the requests whose response status o.Count
// accepts (failed logins): peeked before the handler, charged after it
// (or taken first and refunded, o.ChargeFirst); see
// [httplimit.WithOutcome] for the concurrency bound.
func WithOutcome(o Outcome) Option { return httplimit.WithOutcome(o) }

// StatusIn is an [Outcome] Count accepting exactly codes; see
// [httplimit.StatusIn].
func StatusIn(codes ...int) func(status int) bool { return httplimit.StatusIn(codes...) }

// StatusAtLeast is an [Outcome] Count accepting statuses >= min; see
// [httplimit.StatusAtLeast].
func StatusAtLeast(min int) func(status int) bool { return httplimit.StatusAtLeast(min) }
