package storekit

import (
	"fmt"
	"slices"
	"sync"

	"github.com/limitkit/limitkit/core"
)

// PolicyRegistrar is implemented by stores that
// keep per-key state by policy name (memstore, redisstore, the fleet
// tier). [core.NewLimiter] calls RegisterPolicy with the Limiter's copy of its
// policy, after validating it, and fails with its error; the Limiter
// keeps the Registration and releases it in [core.Limiter.Release].
//
// RegisterPolicy claims p's name on the store for p's configuration (what
// [core.SameState] compares). Claims of one name and one configuration add up,
// so equal policies share the name's state, as Limiters built per request
// must; a claim of another configuration while the name is claimed is an
// error that names both configurations and what to change. replaces are
// the registrations of Limiters that p takes over from (a rules reload
// that changes a rule's limits, see [core.Replacing]): when they are every
// live claim of the name's current configuration, p's configuration takes
// the name over at once, and their claims end (their Release then changes
// nothing but what the store kept for them, such as a table set aside for
// requests in flight). A store should also refuse at registration every
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
	core.Store
	RegisterPolicy(p *core.Policy, replaces ...core.Registration) (core.Registration, error)
}

// PolicyRegistry is the name → configuration
// bookkeeping of a [PolicyRegistrar]: a count of live claims per policy
// name and the configuration they share. Its zero value is empty and
// ready; it is safe for concurrent use. It holds one entry per claimed
// name: Limiters built per request that are never released add to a
// count, not to its size.
type PolicyRegistry struct {
	mu  sync.Mutex
	m   map[string]*nameClaims
	gen uint64
}

type nameClaims struct {
	p    *core.Policy // the configuration (the first claimant's policy)
	refs int          // live claims
	gen  uint64       // changes when another configuration takes the name over
}

// PolicyClaim is one claim made by
// [PolicyRegistry.Claim]. It is a
// [core.Registration]; a store that wraps it in its own keeps it to pass to a
// later Claim as one of the replaced.
type PolicyClaim struct {
	r    *PolicyRegistry
	p    *core.Policy
	gen  uint64
	done bool // under r.mu
}

// Policy returns the claimed policy.
func (c *PolicyClaim) Policy() *core.Policy { return c.p }

// Release ends the claim (see End).
func (c *PolicyClaim) Release() { c.End() }

// End ends the claim and reports whether it was the name's last live
// claim: the name is then free, and the store may drop its state. Only
// its first call counts; a claim whose name another configuration took
// over has ended already.
func (c *PolicyClaim) End() (last bool) {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.done {
		return false
	}
	c.done = true
	e := r.m[c.p.Name]
	if e == nil || e.gen != c.gen {
		return false
	}
	e.refs--
	if e.refs > 0 {
		return false
	}
	delete(r.m, c.p.Name)
	return true
}

// Claim records a claim of p's name for p's configuration (see
// [PolicyRegistrar] for replaces, which are claims of this registry). It
// reports whether p took the name over from another configuration; the
// error names both configurations and says what to change.
func (r *PolicyRegistry) Claim(p *core.Policy, replaces ...*PolicyClaim) (c *PolicyClaim, takeover bool, err error) {
	if p == nil {
		return nil, false, fmt.Errorf("core: register: nil policy")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*nameClaims{}
	}
	e := r.m[p.Name]
	switch {
	case e == nil:
	case core.SameState(e.p, p):
	default:
		var listed []*PolicyClaim
		for _, q := range replaces {
			if q != nil && q.r == r && !q.done && q.gen == e.gen && q.p.Name == p.Name && !slices.Contains(listed, q) {
				listed = append(listed, q)
			}
		}
		if len(listed) == 0 {
			return nil, false, fmt.Errorf("core: policy name %q is already used on this store by a policy of other limits (%s; this one: %s): "+
				"two limits under one name would share or split one quota; give this policy its own name, build it with the same limits, "+
				"or release the other Limiters first (Limiter.Release; a reload passes core.Replacing)",
				p.Name, e.p.StateString(), p.StateString())
		}
		if len(listed) < e.refs {
			return nil, false, fmt.Errorf("core: policy name %q: %d live Limiters use it with other limits (%s; this one: %s), and core.Replacing lists %d of them; "+
				"release the others first, or give this policy its own name", p.Name, e.refs, e.p.StateString(), p.StateString(), len(listed))
		}
		for _, q := range listed {
			q.done = true
		}
		e, takeover = nil, true
	}
	if e == nil {
		r.gen++
		e = &nameClaims{p: p, gen: r.gen}
		r.m[p.Name] = e
	}
	e.refs++
	return &PolicyClaim{r: r, p: p, gen: e.gen}, takeover, nil
}

// Len is the number of claimed names.
func (r *PolicyRegistry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
