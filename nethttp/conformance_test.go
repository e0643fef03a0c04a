package nethttp_test

import (
	"testing"

	publicsuite "github.com/limitkit/limitkit/httplimit/adaptertest"
	"github.com/limitkit/limitkit/internal/adaptertest"
)

// TestConformance runs the shared adapter suite (internal/adaptertest)
// against this package.
func TestConformance(t *testing.T) { adaptertest.Run(t, adaptertest.NetHTTP()) }

// TestPublicConformance runs the public adapter suite
// (httplimit/adaptertest), which an adapter outside the module runs too,
// with the same harness.
func TestPublicConformance(t *testing.T) { publicsuite.Run(t, adaptertest.NetHTTP()) }
