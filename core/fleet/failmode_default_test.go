package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultFailModeAppliesToUnsetPolicies: a policy that sets no fail
// mode (core.FailOpen, the zero value) fails as WithDefaultFailMode says
// when its remote store is down, through the Limiter: closed denies,
// open admits, local decides by the divided limit; a policy with its own
// mode keeps it. The StoreError (and so the log line) names the mode that
// was applied, not the policy's zero value.
func TestDefaultFailModeAppliesToUnsetPolicies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		def, own core.FailMode
		allowed  int           // of 10 requests, limit 4 with a fleet of 2
		applied  core.FailMode // the StoreError's (and the log's) mode
	}{
		{def: core.FailClosed, own: core.FailOpen, allowed: 0, applied: core.FailClosed},
		{def: core.FailOpen, own: core.FailOpen, allowed: 10, applied: core.FailOpen},
		{def: core.FailLocal, own: core.FailOpen, allowed: 2, applied: core.FailLocal},
		{def: core.FailOpen, own: core.FailClosed, allowed: 0, applied: core.FailClosed},
		{def: core.FailClosed, own: core.FailLocal, allowed: 2, applied: core.FailLocal},
	} {
		t.Run(tc.def.String()+"/"+tc.own.String(), func(t *testing.T) {
			remote := newFake()
			remote.setFail(errDown)
			tier := newTier(t, remote, WithDefaultFailMode(tc.def), WithFleetSize(2), WithDenyCacheTTL(0), WithFlapHorizon(0))
			pol := core.Policy{Name: "p", FailMode: tc.own, Limits: []core.Limit{core.Per(4, time.Hour)}}
			l := core.MustNewLimiter(tier, pol)
			allowed := 0
			for i := 0; i < 10; i++ {
				d, err := l.Allow(ctx, "k")
				var se *core.StoreError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tc.applied, se.Mode, "the fail mode applied")
				assert.True(t, d.Degraded)
				if d.Allowed {
					allowed++
				}
			}
			assert.Equal(t, tc.allowed, allowed)
		})
	}
}
