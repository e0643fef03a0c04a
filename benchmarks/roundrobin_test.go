package benchmarks

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// The same-run comparisons below (BenchmarkHotKeyCPU,
// BenchmarkMiddlewareCPU) run every row in one loop, round robin, a chunk
// of operations at a time, on one locked OS thread, and time each chunk
// twice: the thread's CPU time (what the code costs; a descheduled thread
// accrues none) and the wall clock. A row's figure is the median over the
// rounds, and a ratio or a difference between two rows is the median of
// the per-round ratios or differences: a slow second on a shared machine
// slows the rows of that round alike, and the median leaves it out. This
// is how the ratios of docs/benchmarks.md reproduce on a loaded machine, where the
// classic one-row-after-the-other ns/op moves by ±30 %.

// rrRow is one operation to time.
type rrRow struct {
	name string
	op   func()
}

// rrResult holds per-round ns per operation (CPU and wall) per row.
type rrResult struct {
	names     []string
	cpu, wall [][]float64
}

// roundRobin runs b.N rounds of chunk operations of every row.
func roundRobin(b *testing.B, rows []rrRow, chunk int) *rrResult {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := &rrResult{cpu: make([][]float64, len(rows)), wall: make([][]float64, len(rows))}
	for _, row := range rows {
		r.names = append(r.names, row.name)
		for range chunk { // warm up: caches, tables, interned keys
			row.op()
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for j, row := range rows {
			c0, w0 := threadCPU(), time.Now()
			for range chunk {
				row.op()
			}
			w1, c1 := time.Now(), threadCPU()
			r.cpu[j] = append(r.cpu[j], float64(c1-c0)/float64(chunk))
			r.wall[j] = append(r.wall[j], float64(w1.Sub(w0))/float64(chunk))
		}
	}
	b.StopTimer()
	return r
}

func (r *rrResult) row(name string) int {
	j := slices.Index(r.names, name)
	if j < 0 {
		panic("no row " + name)
	}
	return j
}

// report reports every row's median CPU and wall ns per operation.
func (r *rrResult) report(b *testing.B) {
	for j, n := range r.names {
		b.ReportMetric(median(r.cpu[j]), "cpu-ns:"+n)
		b.ReportMetric(median(r.wall[j]), "ns:"+n)
	}
}

// ratio reports the median per-round ratio a/b of CPU time, as unit.
func (r *rrResult) ratio(b *testing.B, a, over, unit string) {
	ja, jb := r.row(a), r.row(over)
	x := make([]float64, len(r.cpu[ja]))
	for i := range x {
		x[i] = r.cpu[ja][i] / r.cpu[jb][i]
	}
	b.ReportMetric(median(x), unit)
}

// diff reports the median per-round difference a-b of CPU ns, as unit.
func (r *rrResult) diff(b *testing.B, a, minus, unit string) {
	ja, jb := r.row(a), r.row(minus)
	x := make([]float64, len(r.cpu[ja]))
	for i := range x {
		x[i] = r.cpu[ja][i] - r.cpu[jb][i]
	}
	b.ReportMetric(median(x), unit)
}
