package fleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
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

// byRemote answers every take at once; TakeBy records the deadline it
// was given and whether its context carried one.
type byRemote struct {
	deadlineRemote
	dl      atomic.Int64
	withCtx atomic.Bool
}

func (r *byRemote) TakeBy(ctx context.Context, dl time.Time, _ string, p *core.Policy, _ time.Time, _ int64) (core.Decision, error) {
	r.dl.Store(dl.UnixNano())
	_, ok := ctx.Deadline()
	r.withCtx.Store(ok)
	return core.Decision{Allowed: true, Remaining: 1, Policy: p.Name}, nil
}

// TestExactTakeHandsTheDeadlineOn: in exact mode every take goes to the
// remote store; one with TakeBy (the Redis store) is handed the Limiter's
// deadline as it is, to move and enforce by its own rule (the Redis
// store's is the tier's), with no context bounded by it: no timer and no
// allocation in the tier (a pipelined Redis store then arms none
// either). Old code: a context.WithDeadline per take, whose timer and
// allocations cost the Envoy rate limit service a twentieth of its CPU.
func TestExactTakeHandsTheDeadlineOn(t *testing.T) {
	probe := schedlag.New()
	probe.Record(probe.Now(), 30*time.Millisecond) // the tier's bound would move the deadline
	remote := &byRemote{}
	tier := newTier(t, remote, withLagProbe(probe), WithDenyCacheTTL(0))
	p := &core.Policy{Name: "exact", Limits: []core.Limit{core.PerMinute(1_000_000)}}
	require.NoError(t, p.Validate())
	ctx := context.Background()
	dl := time.Now().Add(time.Second)
	_, err := tier.TakeBy(ctx, dl, "k", p, time.Now(), 1)
	require.NoError(t, err)
	require.Equal(t, dl.UnixNano(), remote.dl.Load(), "the deadline, unmoved")
	require.False(t, remote.withCtx.Load(), "no context bounded by it")
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := tier.TakeBy(ctx, dl, "k", p, time.Now(), 1); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "allocations per exact take")
	// a caller's own deadline still reaches the remote store in ctx
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = tier.TakeBy(cctx, dl, "k", p, time.Now(), 1)
	require.NoError(t, err)
	require.True(t, remote.withCtx.Load())
}
