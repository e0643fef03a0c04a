package redisstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// forceGenericScripts makes every policy compiled until t ends run its
// algorithm's generic script: the specialised single- and multi-limit
// scripts drop out of the tables compile chooses from. (No test in this
// package runs in parallel, so swapping the tables is safe.)
func forceGenericScripts(t *testing.T) {
	t.Helper()
	s1, m1 := single, multi
	single, multi = [len(single)]*script{}, [len(multi)]*script{}
	t.Cleanup(func() { single, multi = s1, m1 })
}

// alreadyGeneric names, while TestGenericScripts runs, the policies of
// diffPolicies whose production script is the generic one: the
// differential tests have run those as they are, so diffPolicies leaves
// them out of the rerun.
var alreadyGeneric map[string]bool

// TestGenericScripts runs the differential tests and the TTL tests with
// the generic scripts forced for every policy shape, so that the generic
// scripts, which serve only some multi-limit policies in production (and
// every policy when the specialised ones are missing), stay exact too.
// The policies production already runs on a generic script (10 of the
// 50 of diffPolicies, logged) are left out of TestDifferential's rerun,
// which covered them unforced: 40 are forced.
func TestGenericScripts(t *testing.T) {
	skip := map[string]bool{}
	all := diffPolicies()
	for _, pol := range all {
		c, err := (&redisStore{}).compile(mustPolicy(t, pol))
		require.NoError(t, err)
		if c.script == generic[pol.Algorithm] {
			skip[pol.Name] = true
		}
	}
	t.Logf("%d of %d policies already run a generic script in production; %d are forced", len(skip), len(all), len(all)-len(skip))
	alreadyGeneric = skip
	t.Cleanup(func() { alreadyGeneric = nil })
	forceGenericScripts(t)
	for _, pol := range diffPolicies() {
		c, err := (&redisStore{}).compile(mustPolicy(t, pol))
		require.NoError(t, err)
		require.Same(t, generic[pol.Algorithm], c.script, "%s runs the generic script", pol.Name)
	}
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"Differential", TestDifferential},
		{"DifferentialClockBack", TestDifferentialClockBack},
		{"StepTable", TestStepTable},
		{"DifferentialLargeCounts", TestDifferentialLargeCounts},
		{"DifferentialLargeLog", TestDifferentialLargeLog},
		{"DifferentialLogGrowsPastWhole", TestDifferentialLogGrowsPastWhole},
		{"TTLHygiene", TestTTLHygiene},
		{"TTLRepair", TestTTLRepair},
	} {
		t.Run(tc.name, tc.test)
	}
}
