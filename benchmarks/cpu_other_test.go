//go:build !linux

package benchmarks

import "time"

// threadCPU returns 0 where per-thread CPU time is not available; the
// cpu-ns figures are then 0.
func threadCPU() time.Duration { return 0 }

// processCPU returns 0 where the process's CPU time is not read.
func processCPU() time.Duration { return 0 }

// threadSched returns 0s where a thread's scheduling times are not read;
// the redis-on-cpu and redis-runq figures are then 0.
func threadSched(pid string) (run, wait time.Duration) { return 0, 0 }
