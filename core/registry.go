package core

import (
	"fmt"
	"slices"
	"strings"
)

// policyRegistrar is a store that registers policy names
// (storekit.PolicyRegistrar documents the contract): [NewLimiter] calls
// RegisterPolicy with the Limiter's copy of its policy, after validating
// it, and fails with its error; the Limiter keeps the Registration and
// releases it in [Limiter.Release].
type policyRegistrar interface {
	Store
	RegisterPolicy(p *Policy, replaces ...Registration) (Registration, error)
}

// Registration is one claim of a policy name, returned by a store that
// registers policy names (see [Limiter.Release]). Release ends it; only its
// first call counts. It must be safe for concurrent use.
type Registration interface {
	Release()
}

// SameState reports whether a and b decide alike on one per-key state:
// same algorithm, limits (a calendar limit's time zones compared by
// name: each time.LoadLocation returns a new *time.Location), buckets,
// soft percentage, CountDenied, Shadow and elastic ceiling. Settings that do not change what the state means
// (FailMode, Mode, Sync, FleetSize, the elastic signal) may differ.
// Policies of one name on one store must be SameState while their
// Limiters are live (see [NewLimiter]).
func SameState(a, b *Policy) bool {
	return a.Algorithm == b.Algorithm && a.Buckets == b.Buckets && a.SoftPercent == b.SoftPercent &&
		a.CountDenied == b.CountDenied && a.Shadow == b.Shadow && slices.EqualFunc(a.Limits, b.Limits, sameLimit) &&
		elasticCeiling(a) == elasticCeiling(b)
}

func elasticCeiling(p *Policy) int {
	if p.Elastic == nil {
		return 0
	}
	return p.Elastic.CeilingPercent
}

// StateString describes what [SameState] compares: the algorithm, the
// limits and the switches that change what the state means, as in
// "gcra 5 per 1m, 100 per 1h soft 10%" or "fixed_window 10 per 1m elastic
// 200%". Error messages and rules.Change use it.
func (p *Policy) StateString() string {
	parts := make([]string, len(p.Limits))
	for i, l := range p.Limits {
		parts[i] = l.String()
	}
	s := p.Algorithm.String() + " " + strings.Join(parts, ", ")
	if p.Buckets != 0 {
		s += fmt.Sprintf(" buckets %d", p.Buckets)
	}
	if p.SoftPercent != 0 {
		s += fmt.Sprintf(" soft %d%%", p.SoftPercent)
	}
	if p.CountDenied {
		s += " count_denied"
	}
	if p.Shadow {
		s += " shadow"
	}
	if p.Elastic != nil {
		s += fmt.Sprintf(" elastic %d%%", p.Elastic.CeilingPercent)
	}
	return s
}
