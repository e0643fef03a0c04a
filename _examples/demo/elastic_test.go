package main

import (
	"strings"
	"testing"
)

// TestDemoElasticOutput: the elastic part of the demo runs on a manual
// clock with requests in order, so its output is fixed: alice is admitted
// up to the ceiling while the service is idle, only to her limit while bob
// loads it, and the fleet's spare capacity goes to whoever asks first.
// (Run it with go test ./_examples/demo; ./... does not reach _examples.)
func TestDemoElasticOutput(t *testing.T) {
	var b strings.Builder
	if err := demoElastic(&b); err != nil {
		t.Fatal(err)
	}
	want := `
Elastic throttling (a manual clock; each minute is a fresh window):
  rule search: 10 per 1m per user, elastic ceiling 200%, fleet capacity 12 per 1m for elastic admissions, room while at most 3 requests are in flight
minute 1, the service idle: alice bursts 25
  alice 25 sent, 20 admitted (10 within the limit, 10 elastic), 5 denied
        last: 429, X-RateLimit-Limit 10, Remaining 0, Retry-After 60
minute 2, bob holds 3 slow requests in flight (the service is loaded): alice bursts 25
  alice 25 sent, 10 admitted (10 within the limit, 0 elastic), 15 denied
        last: 429, X-RateLimit-Limit 10, Remaining 0, Retry-After 60
minute 3, idle again: alice bursts 25, then bob bursts 25 (the fleet's 12 spare go first come, first served)
  alice 25 sent, 20 admitted (10 within the limit, 10 elastic), 5 denied
        last: 429, X-RateLimit-Limit 10, Remaining 0, Retry-After 60
  bob   25 sent, 12 admitted (10 within the limit, 2 elastic), 13 denied
        last: 429, X-RateLimit-Limit 10, Remaining 0, Retry-After 60
`
	if got := b.String(); !strings.HasPrefix(got, want) {
		t.Fatalf("output:\n%s\nwant it to start with:\n%s", got, want)
	}
}
