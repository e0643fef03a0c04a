package rules

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// TestBoundsAreCores: the bounds rules repeats for its own messages
// (maxSync, maxFleetSize, maxLease, maxCeilingPercent, maxTiers) are
// core's: core accepts each bound and refuses one more.
func TestBoundsAreCores(t *testing.T) {
	validate := func(set func(*core.Policy)) error {
		p := core.Policy{Name: "p", Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(10)}}
		set(&p)
		return p.Validate()
	}
	assert.NoError(t, validate(func(p *core.Policy) { p.Sync = maxSync }))
	assert.Error(t, validate(func(p *core.Policy) { p.Sync = maxSync + 1 }))
	assert.NoError(t, validate(func(p *core.Policy) { p.FleetSize = maxFleetSize }))
	assert.Error(t, validate(func(p *core.Policy) { p.FleetSize = maxFleetSize + 1 }))
	sig := core.LoadBelow{InFlight: new(core.InFlight), Max: 1}
	assert.NoError(t, validate(func(p *core.Policy) {
		p.Elastic = &core.Elastic{CeilingPercent: maxCeilingPercent, Signal: sig}
	}))
	assert.Error(t, validate(func(p *core.Policy) {
		p.Elastic = &core.Elastic{CeilingPercent: maxCeilingPercent + 1, Signal: sig}
	}))

	ms := memstore.MustNew()
	defer ms.Close()
	for lease, ok := range map[time.Duration]bool{maxLease: true, maxLease + 1: false} {
		_, err := core.NewConcurrency(ms, core.ConcurrencyPolicy{Name: fmt.Sprint("c", lease), Max: 1, Lease: lease})
		assert.Equal(t, ok, err == nil, "lease %v: %v", lease, err)
	}
	lim := func(name string) *core.Limiter {
		return core.MustNewLimiter(ms, core.Policy{Name: name, Algorithm: core.GCRA, Limits: []core.Limit{core.PerMinute(1)}})
	}
	def := lim("def")
	tiers := map[string]*core.Limiter{}
	for i := range maxTiers {
		tiers[fmt.Sprint("t", i)] = lim(fmt.Sprint("t", i))
	}
	_, err := core.NewTiers(def, tiers, nil)
	require.NoError(t, err)
	tiers["one-more"] = lim("one-more")
	_, err = core.NewTiers(def, tiers, nil)
	assert.Error(t, err)
}
