package fiber3limit_test

import (
	"testing"

	"github.com/limitkit/limitkit/internal/adaptertest"
)

// TestConformance runs the shared adapter suite (internal/adaptertest)
// against this package.
func TestConformance(t *testing.T) { adaptertest.Run(t, adaptertest.Fiber3()) }
