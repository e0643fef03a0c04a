// Package benchalt holds what the benchmarks that compare code shapes in
// one run share: the shapes run alternately, in chunks, so that a load
// change or a fast/slow state of the machine falls on all of them alike,
// and each is reported by its median.
package benchalt

import (
	"slices"
	"testing"
	"time"
)

// Ways runs ways alternately, chunk calls of each per round, for as long
// as b.Loop asks for rounds, and reports the median time of one call of
// each way as "ns:<name>" and, for every way but the first, the median
// of its per-round difference from the first as "ns:<name>-<first>":
// what the first way saves over it. names and ways have the same length,
// at least one. A way stops the benchmark (b.Fatal) when its answer is
// wrong.
func Ways(b *testing.B, chunk int, names []string, ways []func()) {
	ns := make([][]float64, len(ways))
	for b.Loop() {
		for j, way := range ways {
			t0 := time.Now()
			for range chunk {
				way()
			}
			ns[j] = append(ns[j], float64(time.Since(t0))/float64(chunk))
		}
	}
	for j := range ways {
		if j > 0 {
			diff := make([]float64, len(ns[0]))
			for i := range diff {
				diff[i] = ns[j][i] - ns[0][i]
			}
			b.ReportMetric(Median(diff), "ns:"+names[j]+"-"+names[0])
		}
		b.ReportMetric(Median(ns[j]), "ns:"+names[j])
	}
}

// Median is the middle of xs (the mean of the two middle ones for an
// even count), 0 for none; xs is sorted in place.
func Median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n == 0 {
		return 0
	}
	return (xs[(n-1)/2] + xs[n/2]) / 2
}
