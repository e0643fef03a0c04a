package rules

import "github.com/limitkit/limitkit/core"

// Limiters are the limiters of one rule of a [Snapshot]: its own (the
// default tier's), and those of the policies it adds — its tiers, its
// overrides and its also: checks. Build a middleware from them with
// httplimit.WithTiers, WithOverrides and WithCheck.
type Limiters struct {
	// Default is the rule's own limiter: its limits, or tiers.default.
	Default *core.Limiter
	// Tiers maps a tier name to its limiter; nil without tiers.
	Tiers map[string]*core.Limiter
	// Overrides maps an [Override]'s Client ("key:k_big") to its
	// limiter; nil without overrides.
	Overrides map[string]*core.Limiter
	// Also are the limiters of the rule's [Rule.Also] checks, in order.
	Also []*core.Limiter
	// Concurrency is the rule's in-flight limit ([Rule.Concurrency]), for
	// httplimit.WithConcurrency; nil without concurrency:.
	Concurrency *core.Concurrency
}

// index records where each rule's added policies start in s.limiters:
// after the rules' and the descriptors', in rule order (Set.Policies).
func (s *Snapshot[H]) index() {
	s.extra = make([]int, len(s.set.rules))
	at := len(s.set.rules) + len(s.set.descriptors)
	for i := range s.set.rules {
		s.extra[i] = at
		r := &s.set.rules[i]
		at += len(r.Tiers) + len(r.Overrides) + len(r.Also)
	}
}

// RuleLimiters returns every limiter of r, a rule of this snapshot's set;
// the zero Limiters for a rule of another set.
func (s *Snapshot[H]) RuleLimiters(r *Rule) Limiters {
	if !s.own(r) {
		return Limiters{}
	}
	ls := Limiters{Default: s.limiters[r.Index]}
	if s.conc != nil {
		ls.Concurrency = s.conc[r.Index]
	}
	at := s.extra[r.Index]
	if len(r.Tiers) > 0 {
		ls.Tiers = make(map[string]*core.Limiter, len(r.Tiers))
		for _, t := range r.Tiers {
			ls.Tiers[t.Name] = s.limiters[at]
			at++
		}
	}
	if len(r.Overrides) > 0 {
		ls.Overrides = make(map[string]*core.Limiter, len(r.Overrides))
		for _, o := range r.Overrides {
			ls.Overrides[o.Client] = s.limiters[at]
			at++
		}
	}
	for range r.Also {
		ls.Also = append(ls.Also, s.limiters[at])
		at++
	}
	return ls
}
