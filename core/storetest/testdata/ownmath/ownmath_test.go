package ownmath_test

import (
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"

	"example.com/ownmath"
)

// TestConformance runs every suite of limitkit's store conformance that
// applies to the store: Run with its differential (the store decides
// GCRA and fixed-window policies with its own arithmetic, compared step
// by step with core's model), the quota verbs' contract and their
// differential, and the policy registry.
func TestConformance(t *testing.T) {
	f := func(t *testing.T) core.Store { return new(ownmath.Store) }
	t.Run("Run", func(t *testing.T) {
		storetest.Run(t, f, storetest.Options{Goroutines: 200, Calls: 10})
	})
	t.Run("Verbs", func(t *testing.T) { storetest.RunVerbs(t, f, storetest.VerbOptions{}) })
	t.Run("VerbsDifferential", func(t *testing.T) { storetest.RunVerbsDifferential(t, f, storetest.Options{Steps: 1000}) })
	t.Run("Registry", func(t *testing.T) { storetest.RunRegistry(t, f) })
}
