package fleet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestConcurrencyThroughTier: two tiers over one remote store share its
// slots exactly; a tier over a remote without slots fails the call.
func TestConcurrencyThroughTier(t *testing.T) {
	mem := mustMem()
	defer mem.Close()
	remote := remoteMem{mem}
	p := core.ConcurrencyPolicy{Name: "exports", Max: 2}
	a, err := core.NewConcurrency(newTier(t, remote), p)
	require.NoError(t, err)
	b, err := core.NewConcurrency(newTier(t, remote), p)
	require.NoError(t, err)
	ctx := context.Background()
	ra, d, _ := a.Acquire(ctx, "k")
	require.True(t, d.Allowed)
	rb, d, _ := b.Acquire(ctx, "k")
	require.True(t, d.Allowed)
	// held slots are renewed every Lease/3 until released: released at
	// the end, so that no renewal outlives the test and its closed store
	defer rb.Release()
	_, d, _ = a.Acquire(ctx, "k")
	require.False(t, d.Allowed, "the tiers did not share the remote's slots")
	ra.Release()
	rb2, d, _ := b.Acquire(ctx, "k")
	require.True(t, d.Allowed, "a release through a tier did not reach the remote")
	defer rb2.Release()

	c, err := core.NewConcurrency(newTier(t, pingFake{batchFake{newFake()}}), core.ConcurrencyPolicy{Name: "x", Max: 1, FailMode: core.FailClosed})
	require.NoError(t, err)
	_, d, err = c.Acquire(ctx, "k")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "storekit.SlotStore")
	assert.False(t, d.Allowed)
}

// remoteMem is a memstore the tier takes for a remote store.
type remoteMem struct{ fullMem }

func (remoteMem) Local() bool { return false }
