//go:build linux

package adaptertest

import (
	"syscall"
	"time"
)

// ThreadCPU returns the CPU time the calling OS thread has used (user and
// system), or 0 when unknown. Benchmarks that lock their goroutine to its
// thread use it to report cpu-ns/op next to ns/op: on a shared, loaded
// machine wall time includes the time the thread waited for a CPU.
func ThreadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
