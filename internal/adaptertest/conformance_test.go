package adaptertest

import "testing"

// TestConformance drives every scenario through the four adapters.
func TestConformance(t *testing.T) { Run(t, All()...) }
