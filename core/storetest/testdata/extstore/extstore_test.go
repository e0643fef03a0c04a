package extstore_test

import (
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"

	"example.com/extstore"
)

// TestConformance runs limitkit's store conformance suite against the
// store. CoreDecides: the store decides with core's own Decide, so the
// suite's differential against it would compare core with itself.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store { return new(extstore.Store) },
		storetest.Options{CoreDecides: true, Goroutines: 200, Calls: 10})
}
