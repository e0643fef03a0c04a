package fleet

import (
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"
	"github.com/stretchr/testify/require"
)

// newTier builds a tier over remote, closed when the test ends.
func newTier(t testing.TB, remote core.Store, opts ...Option) *fleetStore {
	t.Helper()
	s, err := newFleet(remote, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformanceExactFake runs the store conformance suite against the
// tier in exact mode (with its deny cache) over the in-memory fake: the
// tier decides exactly as core's math does.
func TestConformanceExactFake(t *testing.T) {
	shared := pingFake{batchFake{newFake()}}
	storetest.Run(t, func(t *testing.T) core.Store {
		return newTier(t, pingFake{batchFake{newFake()}})
	}, storetest.Options{})
	_ = shared
}
