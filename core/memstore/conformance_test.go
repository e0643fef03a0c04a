package memstore_test

import (
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storetest"
)

// TestConformance runs the store suite, without its differential against
// core's Decide: the embedded store decides by calling core's Decide on the
// words it keeps, so that comparison would be core against core. Its math
// is checked against independent reference models in core
// (TestAgainstReferenceModels, FuzzDecide) and, through the Redis store's
// differential tests, against a second implementation.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		s := memstore.MustNew()
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.Options{CoreDecides: true})
}
