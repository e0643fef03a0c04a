package memstore

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/limitkit/limitkit/core"
)

// Replacing a policy's table: what a rules reload needs (see rules.Live).
//
// A Store finds a policy's table by name and refuses a policy whose name
// is taken by another configuration. A reload that changes a rule's limits
// needs both for a moment: the requests still in flight under the old rule
// decide on the old table, the requests under the new rule on a new one.
// Replace installs the new table under the name and keeps the old one
// reachable, by pointer, for the old rule's *core.Policy values; Forget
// releases them once those requests are done.

// replaced is the Store's part for Replace and Forget.
type replaced struct {
	aside    atomic.Pointer[map[*core.Policy]asideEntry] // copy on write, under Store.mu
	asideSeq uint64                                      // under Store.mu
}

// asideEntry is a table set aside by Replace, under the hidden name it
// holds in s.tables (so that the sweeper and Stats see it until it is dropped).
type asideEntry struct {
	t    *table
	name string
}

// Replace implements [Store.Replace].
func (s *memStore) Replace(p *core.Policy, inflight ...*core.Policy) (bool, error) {
	if p == nil {
		return false, errors.New("memstore: Replace: nil policy")
	}
	if s.closed.Load() {
		return false, core.ErrClosed
	}
	c, err := p.Compile()
	if err != nil {
		return false, fmt.Errorf("memstore: Replace: %w", err)
	}
	if (*s.tables.Load())[p.Name] == nil {
		// No table yet: register p's now, as its first Take would, so
		// that a policy in flight cannot take the name first with
		// another configuration.
		_, err := s.register(p)
		if err == nil || (*s.tables.Load())[p.Name] == nil {
			return false, err
		}
		// another configuration took the name meanwhile: replace it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.tables.Load()
	cur := old[p.Name]
	if sameConfig(cur.policy.Policy(), p) {
		return false, nil
	}
	t, err := s.newTable(c)
	if err != nil {
		return false, err
	}
	t.key = p
	m := make(map[string]*table, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[p.Name] = t
	aside := map[*core.Policy]asideEntry{}
	if a := s.aside.Load(); a != nil {
		for k, v := range *a {
			aside[k] = v
		}
	}
	held := false
	if len(inflight) > 0 {
		s.asideSeq++
		e := asideEntry{t: cur, name: p.Name + "\x00" + strconv.FormatUint(s.asideSeq, 10)} // NUL: no policy name has one
		for _, q := range inflight {
			// q decides on cur unless an earlier Replace set a table
			// aside for it, or it has another configuration (refused).
			if _, ok := aside[q]; ok || q == nil || q.Name != p.Name || q != cur.key && !sameConfig(cur.policy.Policy(), q) {
				continue
			}
			aside[q] = e
			held = true
		}
		if held {
			m[e.name] = cur
		}
	}
	// aside first: a Take that sees the new table under the name must
	// find the old one set aside for its in-flight policy
	s.aside.Store(&aside)
	s.tables.Store(&m)
	s.last.CompareAndSwap(cur, nil)
	return true, nil
}

// Forget implements [Store.Forget].
func (s *memStore) Forget(policies ...*core.Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.aside.Load()
	if a == nil || len(*a) == 0 {
		return
	}
	aside := make(map[*core.Policy]asideEntry, len(*a))
	for k, v := range *a {
		aside[k] = v
	}
	changed := false
	for _, p := range policies {
		if _, ok := aside[p]; ok {
			delete(aside, p)
			changed = true
		}
	}
	if !changed {
		return
	}
	held := map[string]bool{}
	for _, e := range aside {
		held[e.name] = true
	}
	old := *s.tables.Load()
	m := make(map[string]*table, len(old))
	for k, v := range old {
		m[k] = v
	}
	for _, e := range *a {
		if !held[e.name] {
			delete(m, e.name)
		}
	}
	s.aside.Store(&aside)
	s.tables.Store(&m)
}

// asideTable returns the table Replace set aside for p, or nil.
func (s *memStore) asideTable(p *core.Policy) *table {
	a := s.aside.Load()
	if a == nil || len(*a) == 0 {
		return nil
	}
	return (*a)[p].t
}
