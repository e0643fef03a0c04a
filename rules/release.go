package rules

import (
	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// Retiring what a reload no longer uses. On a store that registers policy
// names (storekit.PolicyRegistrar: memstore, redisstore, the fleet tier),
// every Limiter a snapshot built is registered; a rebuilt rule's Limiter
// takes its name over from the older snapshots' Limiters of that name
// (core.Replacing), and a Limiter is released once no snapshot under way
// uses it, with the capacity limits of elastic rules no set uses any
// more. So reloads that change limits, capacities or names leave the
// store's policy count and the heap flat.

// tableReplacer is store's tableStore, unless the store registers
// policies itself (then NewLimiter, with core.Replacing, does the work).
func tableReplacer(store core.Store) (tableStore, bool) {
	if _, ok := store.(storekit.PolicyRegistrar); ok {
		return nil, false
	}
	r, ok := store.(tableStore)
	return r, ok
}

// limiterOpts are the options of a new Limiter for policy name: l's, and
// core.Replacing the Limiters of that name that prev and the superseded
// snapshots still hold. Called with l.mu held, or before l is shared.
func (l *Live[H]) limiterOpts(name string, prev *Snapshot[H]) []core.Option {
	var old []*core.Limiter
	add := func(s *Snapshot[H]) {
		for _, lim := range s.limiters {
			if lim.Policy().Name == name {
				old = append(old, lim)
			}
		}
	}
	if prev != nil {
		add(prev)
	}
	for s := range l.old {
		add(s)
	}
	if len(old) == 0 {
		return l.opts
	}
	return append(append(make([]core.Option, 0, len(l.opts)+1), l.opts...), core.Replacing(old...))
}

// releaseNew releases the Limiters s built that prev does not share: s
// failed to build and is never published.
func (s *Snapshot[H]) releaseNew(prev *Snapshot[H]) {
	kept := map[*core.Limiter]bool{}
	if prev != nil {
		for _, lim := range prev.limiters {
			kept[lim] = true
		}
	}
	for _, lim := range s.limiters {
		if !kept[lim] {
			lim.Release()
		}
	}
}

// releaseUnused releases the Limiters of s, a drained snapshot, that
// neither the current snapshot nor another superseded one under way uses,
// and the capacity limits of elastic rules that none of their sets uses.
// Called with l.mu held.
func (l *Live[H]) releaseUnused(s *Snapshot[H]) {
	used := map[*core.Limiter]bool{}
	live := []*Snapshot[H]{l.cur.Load()}
	for o := range l.old {
		live = append(live, o)
	}
	for _, o := range live {
		for _, lim := range o.limiters {
			used[lim] = true
		}
	}
	for _, lim := range s.limiters {
		if !used[lim] {
			lim.Release()
		}
	}
	if sig := s.set.sig; sig != nil {
		var sets []*Set
		for _, o := range live {
			if o.set.sig == sig {
				sets = append(sets, o.set)
			}
		}
		sig.retain(sets)
	}
}

// retain releases the capacity limits that no rule or descriptor of sets
// uses (a reload changed the capacity, or removed the rule): a [Live]
// calls it when a superseded snapshot drains. A capacity limit handed to
// a set since the Live last published one is kept: that set may be on
// its way to Swap. One handed to a set that was never swapped in goes at
// a drain after the next publication.
func (sig *Signals) retain(sets []*Set) {
	keep := map[string]bool{}
	for _, set := range sets {
		for i := range set.rules {
			if r := &set.rules[i]; r.Elastic != nil && r.Elastic.Capacity.Requests > 0 {
				keep[capacityName(r.Name, r.Elastic.Capacity)] = true
			}
		}
		for i := range set.descriptors {
			if d := &set.descriptors[i]; d.Elastic != nil && d.Elastic.Capacity.Requests > 0 {
				keep[capacityName(d.Name(), d.Elastic.Capacity)] = true
			}
		}
	}
	sig.mu.Lock()
	defer sig.mu.Unlock()
	for name, e := range sig.caps {
		if !keep[name] && e.gen < sig.gen {
			e.lim.Release()
			delete(sig.caps, name)
		}
	}
}

// published records that a Live published a set: the capacity limits
// handed out before are no longer protected from retain.
func (sig *Signals) published() {
	sig.mu.Lock()
	sig.gen++
	sig.mu.Unlock()
}
