package adaptertest

import (
	"runtime"
	"testing"
)

// SerialLoop runs body b.N times on one locked OS thread, with allocation
// reporting, and reports cpu-ns/op (thread CPU time per iteration) besides
// the wall-clock ns/op.
func SerialLoop(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	start := ThreadCPU()
	for b.Loop() {
		body()
	}
	if cpu := ThreadCPU() - start; cpu > 0 && b.N > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
