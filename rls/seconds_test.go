package rls

import (
	"testing"
	"time"
)

// TestEpochSecondsBoundary: a reset that falls on a second (a window's
// boundary, a calendar period's midnight), worked out by a store from the
// reading in whole microseconds, is that second in the X-RateLimit-Reset
// header, whatever the reading's nanoseconds; a reset past it rounds up.
func TestEpochSecondsBoundary(t *testing.T) {
	now := time.Unix(1_795_931_731, 456_789_123)
	boundary := time.Unix(1_796_079_600, 0)
	d := time.Duration(boundary.UnixMicro()-now.UnixMicro()) * time.Microsecond
	if got := epochSeconds(now, d); got != boundary.Unix() {
		t.Fatalf("epochSeconds at a boundary = %d, want %d", got, boundary.Unix())
	}
	if got := epochSeconds(now, d+time.Microsecond); got != boundary.Unix()+1 {
		t.Fatalf("epochSeconds past a boundary = %d, want %d", got, boundary.Unix()+1)
	}
}
