package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestTakeByFromLeaseAllocatesNothing: a Limiter's take (TakeBy, with its
// store deadline) that a lease answers builds no deadline context: no
// timer, no allocation, as the tier's hot path must (the Envoy rate limit
// service's fleet mode spent a fifth of its CPU there). Only a take that
// goes to the remote store pays for one.
func TestTakeByFromLeaseAllocatesNothing(t *testing.T) {
	remote := newFake()
	tier := newTier(t, remote, WithSync(time.Second))
	p := &core.Policy{Name: "hot", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(1_000_000)}}
	require.NoError(t, p.Validate())
	ctx := context.Background()
	now := time.Unix(1_700_000_040, 0)
	// load the key and grow its lease
	for range 64 {
		d, err := tier.TakeBy(ctx, time.Now().Add(time.Second), "k", p, now, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	calls := remote.calls.Load()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := tier.TakeBy(ctx, time.Now().Add(time.Second), "k", p, now, 1); err != nil {
			t.Fatal(err)
		}
	})
	// a few takes renew the lease at the remote store (a context and
	// its allocations each); the others, from the lease, allocate
	// nothing: on average far below one allocation a take (a deadline
	// context on every take costs at least two)
	remoteTakes := remote.calls.Load() - calls
	require.Less(t, remoteTakes, int64(100), "the lease should answer most takes")
	require.Less(t, allocs, 1.0, "allocations per take (%d of 1001 went to the remote store)", remoteTakes)
}
