package metrics_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// TestInFlightGauge: limitkit_in_flight{policy} is the slots a
// Concurrency observed by the metrics holds.
func TestInFlightGauge(t *testing.T) {
	m, reg := newRegistry(t)
	store := memstore.MustNew()
	defer store.Close()
	c, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "exports", Max: 3}, core.WithObserver(m))
	require.NoError(t, err)
	var rels []core.Slot
	for i := 0; i < 4; i++ {
		rel, _, _ := c.Acquire(context.Background(), "alice")
		rels = append(rels, rel)
	}
	series := map[string]string{"policy": "exports"}
	assert.Equal(t, 3.0, gauge(t, reg, "limitkit_in_flight", series))
	rels[0].Release()
	rels[0].Release()
	assert.Equal(t, 2.0, gauge(t, reg, "limitkit_in_flight", series))
	for _, r := range rels {
		r.Release()
	}
	assert.Equal(t, 0.0, gauge(t, reg, "limitkit_in_flight", series))
}
