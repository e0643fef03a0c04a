package main

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestDemoFleetUnderLoad runs the fleet comparison with a busy loop per
// CPU: every row stays within the bound it prints, and the text never
// claims a bound its own numbers break.
// (Run it with go test ./_examples/demo; ./... does not reach _examples.)
func TestDemoFleetUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("about 6 seconds of load")
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := 0; !stop.Load(); x++ {
			}
		}()
	}
	var b strings.Builder
	err := demoFleet(&b)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log(out)
	if !strings.Contains(out, "DEGRADED") {
		t.Error("the table has no degraded column")
	}
	if strings.Contains(out, "NO: ") {
		t.Error("a row went over its bound")
	}
	if strings.Contains(out, "NO: ") == strings.Contains(out, "Every mode kept its bound") {
		t.Error("the closing claim contradicts the table")
	}
}
