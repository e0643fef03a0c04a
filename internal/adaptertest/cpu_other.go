//go:build !linux

package adaptertest

import "time"

// ThreadCPU returns 0 where per-thread CPU time is not available.
func ThreadCPU() time.Duration { return 0 }
