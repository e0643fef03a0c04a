package grpclimit

import (
	"testing"
	"unsafe"
)

// The request view is the one allocation of an admitted call without
// WithOutcome (TestUnaryAllocs): it stays within the 64-byte size class,
// so that telling an unregistered method apart costs no bytes per call
// (a route string beside the full method made it 72 bytes, 80 allocated).
func TestRequestViewFitsIn64Bytes(t *testing.T) {
	if s := unsafe.Sizeof(request{}); s > 64 {
		t.Fatalf("grpclimit's request view is %d bytes, over the 64-byte size class", s)
	}
}
