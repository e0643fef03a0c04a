//go:build linux

package benchmarks

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// threadCPU returns the CPU time the calling OS thread has used
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID): nanosecond resolution, where
// getrusage counts in scheduler ticks), or 0 when unknown.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// processCPU returns the CPU time the whole process has used
// (CLOCK_PROCESS_CPUTIME_ID), or 0 when unknown.
func processCPU() time.Duration {
	var ts syscall.Timespec
	const clockProcessCPUTimeID = 2
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadSched returns the time the main thread of process pid (a
// redis-server's event loop) has spent on a CPU and waiting in the run
// queue for one (/proc/<pid>/task/<pid>/schedstat), or 0s when unknown.
func threadSched(pid string) (run, wait time.Duration) {
	data, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/schedstat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, 0
	}
	r, _ := strconv.ParseInt(f[0], 10, 64)
	w, _ := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(r), time.Duration(w)
}
