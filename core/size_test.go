package core

import (
	"testing"
	"unsafe"
)

// TestHotPathSizes guards what every decision copies: a Decision is
// returned by value through the store, the Limiter and the adapters, and
// a Limit is copied into each. Adding the calendar period as three fields
// grew them from 80/24 to 104/48 bytes and cost the hot key 20%
// (BenchmarkHotKeyCPU, benchmarks/); the period now hangs off one pointer
// and the flags share a word.
func TestHotPathSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are stated for 64-bit platforms")
	}
	if got := unsafe.Sizeof(Limit{}); got > 32 {
		t.Errorf("Limit is %d bytes; keep it within 32 (three words and one pointer)", got)
	}
	if got := unsafe.Sizeof(Decision{}); got > 80 {
		t.Errorf("Decision is %d bytes; keep it within 80", got)
	}
}
