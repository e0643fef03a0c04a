package respond

import (
	"net/http"
	"testing"
)

// The parts of the common response's header write that are the Go
// runtime's, not limitkit's, for the figures in benchmarks/RESULTS.md:
// a header map's three assignments, the benchmark harness's clearing of
// them between requests, the values' block allocation, and SetHTTPTriple
// itself (all three together, with the formatting).

var (
	blockSink *httpBlock3s
	tripleVal = [3][]string{{"1000000000"}, {"999999999"}, {"1700000000"}}
)

func BenchmarkHeaderCost(b *testing.B) {
	b.Run("clear-empty", func(b *testing.B) {
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			clear(h)
		}
	})
	b.Run("assign3", func(b *testing.B) { // overwrite: no clear
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			h[HeaderLimit], h[HeaderRemaining], h[HeaderReset] = tripleVal[0], tripleVal[1], tripleVal[2]
		}
	})
	b.Run("clear+assign3", func(b *testing.B) {
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			clear(h)
			h[HeaderLimit], h[HeaderRemaining], h[HeaderReset] = tripleVal[0], tripleVal[1], tripleVal[2]
		}
	})
	b.Run("block", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			blockSink = new(httpBlock3s)
		}
	})
	b.Run("clear+SetHTTPTriple", func(b *testing.B) {
		h := http.Header{}
		limitVals, reset := Values("1000000000"), EpochString(1_700_000_000, 1_700_000_000)
		b.ReportAllocs()
		for b.Loop() {
			clear(h)
			SetHTTPTriple(h, limitVals, 999_999_999, reset, 1_700_000_000)
		}
	})
}
