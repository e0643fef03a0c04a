package rules

import (
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
)

// concurrencyDoc is a rule's in-flight limit as written: concurrency: N
// and lease: 30s.
type concurrencyDoc struct {
	Concurrency int64  `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	Lease       string `yaml:"lease,omitempty" json:"lease,omitempty"`
}

// maxConcurrency bounds concurrency: (a key's holders are one sorted set
// on Redis, one slice in memory).
const maxConcurrency = 100_000

// concOnlyLimit is the rate limit of a rule with only concurrency:, one
// no client reaches.
var concOnlyLimit = core.Per(1<<30, time.Hour)

// resolveConcurrency reads concurrency: and lease: into r.
func resolveConcurrency(d *ruleDoc, r *Rule, fail func(field, msg string)) {
	cd := &d.concurrencyDoc
	switch {
	case cd.Concurrency < 0 || cd.Concurrency > maxConcurrency:
		fail("concurrency", fmt.Sprintf("%d must be between 1 and %d (requests of one key in flight at once)", cd.Concurrency, maxConcurrency))
	case cd.Concurrency > 0:
		r.Concurrency = cd.Concurrency
	}
	if cd.Lease == "" {
		return
	}
	if cd.Concurrency == 0 {
		fail("lease", "lease: is the lease of concurrency:; add concurrency: N or remove it")
		return
	}
	lease, err := time.ParseDuration(cd.Lease)
	if err != nil || lease < time.Second || lease > maxLease {
		fail("lease", fmt.Sprintf("%q must be a duration between 1s and %v (e.g. 30s)", cd.Lease, maxLease))
		return
	}
	r.Lease = lease
}

// checkConcurrency reports a concurrency: the rule's other fields cannot
// go with.
func (r *Rule) checkConcurrency(fail func(field, msg string)) {
	if r.Concurrency > 0 && r.FailMode == core.FailLocal {
		fail("concurrency", "fail_mode local does not apply to concurrency: (no local fallback can count another server's requests); use open or closed")
	}
}

// concurrencyDoc writes r's in-flight limit into d.
func (r *Rule) concurrencyDoc(d *ruleDoc) {
	d.Concurrency = r.Concurrency
	if r.Lease != 0 {
		d.Lease = r.Lease.String()
	}
	if r.concOnly {
		d.Limits = nil
	}
}

// concurrencyPolicy is r's in-flight limit, for core.NewConcurrency.
func (r *Rule) concurrencyPolicy() core.ConcurrencyPolicy {
	return core.ConcurrencyPolicy{Name: r.Name, Max: r.Concurrency, Lease: r.Lease, FailMode: r.FailMode}
}

// compileConcurrency gives s the in-flight limit of each rule with
// concurrency:, prev's when the rule's limit is the same (its mean hold
// time, Retry-After's basis, carries over; slots live in the store either
// way, so requests holding one under prev release it there).
func (l *Live[H]) compileConcurrency(s *Snapshot[H], prev *Snapshot[H]) error {
	var prevBy map[string]*core.Concurrency
	if prev != nil {
		prevBy = map[string]*core.Concurrency{}
		for _, c := range prev.conc {
			if c != nil {
				prevBy[c.Policy().Name] = c
			}
		}
	}
	for i := range s.set.rules {
		r := &s.set.rules[i]
		if r.Concurrency == 0 {
			continue
		}
		if s.conc == nil {
			s.conc = make([]*core.Concurrency, len(s.set.rules))
		}
		p := r.concurrencyPolicy()
		if p.Lease == 0 {
			p.Lease = core.DefaultLease
		}
		if old := prevBy[p.Name]; old != nil && *old.Policy() == p {
			s.conc[i] = old
			continue
		}
		c, err := core.NewConcurrency(l.store, p, l.opts...)
		if err != nil {
			return fmt.Errorf("rules: rule %q: concurrency: %w", r.Name, err)
		}
		s.conc[i] = c
	}
	return nil
}
