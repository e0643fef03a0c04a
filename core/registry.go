package core

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// For store implementers: PolicyRegistrar is implemented by stores that
// keep per-key state by policy name (memstore, redisstore, the fleet
// tier). [NewLimiter] calls RegisterPolicy with the Limiter's copy of its
// policy, after validating it, and fails with its error; the Limiter calls
// the returned release function once, from [Limiter.Release].
//
// RegisterPolicy claims p's name on the store for p's configuration (what
// [SameState] compares). Claims of one name and one configuration add up,
// so equal policies share the name's state, as Limiters built per request
// must; a claim of another configuration while the name is claimed is an
// error that names both configurations and what to change. replaces are
// policies of Limiters that p takes over from (a rules reload that
// changes a rule's limits, see [Replacing]): when the name's current
// configuration is one of theirs, p's configuration takes the name over
// at once, and their claims end (their release functions then do nothing
// to the name's count). A store should also refuse at registration every
// other configuration it cannot decide (its policy cap, a memory budget
// too small for one key, an algorithm it does not implement), so that no
// configuration mistake surfaces as an error of Take.
//
// When a name's last claim is released the store may drop the name's
// state. A Limiter must not be used after Release; a store may then
// decide its keys afresh.
//
// A store that wraps such a store must implement PolicyRegistrar too and
// forward to it (the fleet tier does), or the wrapped store's Take meets
// the mistakes registration would have refused. [PolicyRegistry]
// implements the bookkeeping.
type PolicyRegistrar interface {
	Store
	RegisterPolicy(p *Policy, replaces ...*Policy) (release func(), err error)
}

// SameState reports whether a and b decide alike on one per-key state:
// same algorithm, limits, buckets, soft percentage, CountDenied, Shadow
// and elastic ceiling. Settings that do not change what the state means
// (FailMode, Mode, Sync, FleetSize, the elastic signal) may differ.
// Policies of one name on one store must be SameState (see
// [PolicyRegistrar]).
func SameState(a, b *Policy) bool {
	return a.Algorithm == b.Algorithm && a.Buckets == b.Buckets && a.SoftPercent == b.SoftPercent &&
		a.CountDenied == b.CountDenied && a.Shadow == b.Shadow && slices.Equal(a.Limits, b.Limits) &&
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

// For store implementers: PolicyRegistry is the name → configuration
// bookkeeping of a [PolicyRegistrar]: a count of claims per policy name
// and the configuration they share. Its zero value is empty and ready;
// it is safe for concurrent use. It holds one entry per claimed name:
// Limiters built per request that are never released add to a count,
// not to its size.
type PolicyRegistry struct {
	mu  sync.Mutex
	m   map[string]*claim
	gen uint64
}

type claim struct {
	p    *Policy // the configuration (the first claimant's policy)
	refs int
	gen  uint64 // changes when another configuration takes the name over
}

// Claim records a claim of p's name for p's configuration (see
// [PolicyRegistrar] for replaces). It returns the function that ends the
// claim, which reports whether that was the name's last claim (the name
// is then free, and its state may go) and does nothing after its first
// call, and whether p took the name over from another configuration. The
// error names both configurations and says what to change.
func (r *PolicyRegistry) Claim(p *Policy, replaces ...*Policy) (release func() (last bool), takeover bool, err error) {
	if p == nil {
		return nil, false, fmt.Errorf("core: register: nil policy")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*claim{}
	}
	c := r.m[p.Name]
	switch {
	case c == nil:
		r.gen++
		c = &claim{p: p, gen: r.gen}
		r.m[p.Name] = c
	case SameState(c.p, p):
	case slices.ContainsFunc(replaces, func(q *Policy) bool { return q != nil && q.Name == p.Name && SameState(c.p, q) }):
		r.gen++
		c = &claim{p: p, gen: r.gen}
		r.m[p.Name] = c
		takeover = true
	default:
		return nil, false, fmt.Errorf("core: policy name %q is already used on this store by a policy of other limits (%s; this one: %s): "+
			"two limits under one name would share or split one quota; give this policy its own name, build it with the same limits, "+
			"or release the other Limiter first (Limiter.Release; a reload passes core.Replacing)",
			p.Name, c.p.StateString(), p.StateString())
	}
	c.refs++
	gen := c.gen
	var once sync.Once
	return func() (last bool) {
		once.Do(func() { last = r.release(p.Name, gen) })
		return last
	}, takeover, nil
}

func (r *PolicyRegistry) release(name string, gen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.m[name]
	if c == nil || c.gen != gen {
		return false // taken over meanwhile: the claim ended then
	}
	c.refs--
	if c.refs > 0 {
		return false
	}
	delete(r.m, name)
	return true
}

// Claimed returns the configuration name is claimed for, or nil.
func (r *PolicyRegistry) Claimed(name string) *Policy {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.m[name]; c != nil {
		return c.p
	}
	return nil
}

// Len is the number of claimed names.
func (r *PolicyRegistry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
