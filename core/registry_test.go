package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/limitkit/limitkit/core"
)

// TestSameStateComparesEveryStateSetting: two policies of one name decide
// alike on one per-key state only when every setting that changes what
// the state means is equal (each differing alone makes them differ);
// the settings that do not (fail mode, mode, sync, fleet size, the
// elastic signal) may differ.
func TestSameStateComparesEveryStateSetting(t *testing.T) {
	base := func() core.Policy {
		return core.Policy{Name: "p", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(10)},
			Elastic: &core.Elastic{CeilingPercent: 200}}
	}
	for _, tc := range []struct {
		name   string
		change func(*core.Policy)
		same   bool
	}{
		{"algorithm", func(p *core.Policy) { p.Algorithm = core.TokenBucket }, false},
		{"limits", func(p *core.Policy) { p.Limits = []core.Limit{core.PerMinute(11)} }, false},
		{"buckets", func(p *core.Policy) { p.Buckets = 4 }, false},
		{"soft percent", func(p *core.Policy) { p.SoftPercent = 10 }, false},
		{"count denied", func(p *core.Policy) { p.CountDenied = true }, false},
		{"shadow", func(p *core.Policy) { p.Shadow = true }, false},
		{"elastic ceiling", func(p *core.Policy) { p.Elastic = &core.Elastic{CeilingPercent: 300} }, false},
		{"no elastic", func(p *core.Policy) { p.Elastic = nil }, false},
		{"fail mode", func(p *core.Policy) { p.FailMode = core.FailClosed }, true},
		{"sync", func(p *core.Policy) { p.Sync = time.Second }, true},
		{"fleet size", func(p *core.Policy) { p.FleetSize = 3 }, true},
	} {
		a, b := base(), base()
		tc.change(&b)
		assert.Equal(t, tc.same, core.SameState(&a, &b), tc.name)
		assert.Equal(t, tc.same, core.SameState(&b, &a), tc.name)
	}
	a, b := base(), base()
	assert.True(t, core.SameState(&a, &b), "equal policies")
}
