package rls

import (
	"time"

	"github.com/limitkit/limitkit/core"
)

// The response header names, as the HTTP adapters write them (the names
// httplimit.Fields.At gives): a gateway's client sees the same fields from
// Envoy as from a Go service.
//
// The functions below repeat httplimit/internal/respond's CeilSeconds,
// RetryAfterSeconds and EpochSeconds, which rls cannot import (Go's
// internal rule). One copy for both would have to live in the top-level
// internal/, which httplimit would then import while internal/adaptertest
// imports the adapters above httplimit: an import cycle between
// directories that TestNoUpwardImport refuses. Change one, change both.
const (
	headerLimit      = "X-Ratelimit-Limit"
	headerRemaining  = "X-Ratelimit-Remaining"
	headerReset      = "X-Ratelimit-Reset"
	headerRetryAfter = "Retry-After"
)

// ceilSeconds is d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// retryAfterSeconds is the Retry-After value of a denial: the wait rounded
// up to whole seconds, at least 1, so a client that waits that long is
// admitted. ok is false for core.Never (no wait helps) and for d <= 0.
func retryAfterSeconds(d time.Duration) (secs int64, ok bool) {
	if d <= 0 || d == core.Never {
		return 0, false
	}
	return max(ceilSeconds(d), 1), true
}

// maxEpochOffset caps the reset instant so that Unix seconds never overflow.
const maxEpochOffset = 100 * 366 * 24 * time.Hour

// epochSeconds is the Unix time, in whole seconds rounded up, of now + d,
// now in whole microseconds as the stores decide (see the HTTP adapters'
// respond.EpochSeconds).
func epochSeconds(now time.Time, d time.Duration) int64 {
	d = min(max(d, 0), maxEpochOffset)
	ns := int64(now.Nanosecond())/1000*1000 + int64(d)
	sec := now.Unix() + ns/int64(time.Second)
	if ns%int64(time.Second) != 0 {
		sec++
	}
	return sec
}
