package core

import (
	"errors"
	"fmt"
	"sort"
)

// Bounds of a [Tiers].
const (
	// maxTiers bounds the named tiers of a Tiers (the default not
	// counted): every tier is a policy the store keeps state for.
	maxTiers = 16
	// maxOverrides bounds the per-key overrides of a Tiers.
	maxOverrides = 1024
)

// Tiers chooses, per request, which of several limiters of one endpoint
// applies: the limiter of the request's tier (a plan read from a verified
// JWT claim or a header: "free", "pro"), the default limiter for a
// request whose tier is missing or not one of the named tiers, and, before
// both, the override of one client key (a named customer's API key with
// its own contract). It is the building block under the middlewares'
// httplimit.WithTiers and under a rules file's tiers: and overrides:.
//
// Every limiter of a Tiers has its own policy name, checked by [NewTiers],
// and the stores keep state by policy name, so the counters of two tiers
// never mix: a client whose tier changes (a user who upgrades from free to
// pro) starts on the new tier's quota, full, and finds its old tier's
// state again only if it moves back before that state expires. The tier
// is only looked up, never written into a store key, so a client choosing
// its tier (a header) can reach at most the 1 + 16 + 1024
// policies configured here; which tier source is safe to trust is the
// caller's choice (a verified claim is; a client-set header is not).
//
// A Tiers is immutable and safe for concurrent use. The zero value is not
// usable; build one with NewTiers.
type Tiers struct {
	def       *Limiter
	tiers     map[string]*Limiter
	overrides map[string]*Limiter
}

// NewTiers returns the Tiers of default limiter def, the named tiers
// (tier name → limiter; at most 16, names not empty) and the
// overrides (client key → limiter; at most 1024, keys not
// empty). It fails on a nil limiter and on two limiters (default, tiers,
// overrides) with one policy name: their counters would mix. The maps are
// copied.
func NewTiers(def *Limiter, tiers, overrides map[string]*Limiter) (*Tiers, error) {
	if def == nil {
		return nil, errors.New("core: NewTiers: nil default limiter; pass the limiter of requests without a known tier")
	}
	if len(tiers) > maxTiers {
		return nil, fmt.Errorf("core: NewTiers: %d tiers, at most %d (each is a policy with its own state)", len(tiers), maxTiers)
	}
	if len(overrides) > maxOverrides {
		return nil, fmt.Errorf("core: NewTiers: %d overrides, at most %d", len(overrides), maxOverrides)
	}
	t := &Tiers{def: def, tiers: make(map[string]*Limiter, len(tiers)), overrides: make(map[string]*Limiter, len(overrides))}
	owner := map[string]string{def.Policy().Name: "the default"}
	add := func(kind, name string, l *Limiter, into map[string]*Limiter) error {
		if name == "" {
			return fmt.Errorf("core: NewTiers: an empty %s name", kind)
		}
		if l == nil {
			return fmt.Errorf("core: NewTiers: %s %q: nil limiter", kind, name)
		}
		p := l.Policy().Name
		if o, ok := owner[p]; ok {
			return fmt.Errorf("core: NewTiers: %s %q and %s share the policy name %q: their counters would mix; give each its own policy name", kind, name, o, p)
		}
		owner[p] = fmt.Sprintf("%s %q", kind, name)
		into[name] = l
		return nil
	}
	for _, name := range sortedKeys(tiers) {
		if err := add("tier", name, tiers[name], t.tiers); err != nil {
			return nil, err
		}
	}
	for _, key := range sortedKeys(overrides) {
		if err := add("override", key, overrides[key], t.overrides); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func sortedKeys(m map[string]*Limiter) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Select returns the limiter for a request of the given tier by the given
// client key: key's override if it has one, else tier's limiter, else the
// default (an empty or unknown tier). It does not allocate.
func (t *Tiers) Select(tier, key string) *Limiter {
	if len(t.overrides) > 0 {
		if l, ok := t.overrides[key]; ok {
			return l
		}
	}
	if l, ok := t.tiers[tier]; ok {
		return l
	}
	return t.def
}

// HasVerbs reports whether the Limiter's store implements the quota verbs
// (storekit.VerbStore: Peek, Reset, Charge, Refund), so that a caller that needs
// them (a middleware counting by outcome) can refuse a configuration at
// start-up rather than fail on every request.
func (l *Limiter) HasVerbs() bool {
	_, ok := l.store.(verbsStore)
	return ok
}
