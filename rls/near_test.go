package rls

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// refNearWithin is envoyproxy/ratelimit's near_limit for a charge within
// the limit (src/limiter/base_limiter.go, GetResponseDescriptorStatus and
// checkNearLimitThreshold, at its default NEAR_LIMIT_RATIO), ported line
// by line.
func refNearWithin(limit, before, hits uint64) uint64 {
	var nearLimitRatio float32 = 0.8
	nearLimitThreshold := uint64(math.Floor(float64(float32(limit) * nearLimitRatio)))
	after := before + hits
	if after > nearLimitThreshold {
		if before >= nearLimitThreshold {
			return hits
		}
		return after - nearLimitThreshold
	}
	return 0
}

// TestNearHitsMatchesReference: for every admitted charge on limits up to
// 60 and a sample of large ones (where float32 rounds the threshold), the
// near-limit hits equal the reference's.
func TestNearHitsMatchesReference(t *testing.T) {
	limits := []int64{16_777_217, 16_777_219, 33_554_435, 100_000_007, 1<<31 - 1}
	for l := int64(1); l <= 60; l++ {
		limits = append(limits, l)
	}
	for _, limit := range limits {
		step := max(limit/50, 1)
		for before := int64(0); before < limit; before += step {
			for _, hits := range []int64{1, 2, 3, 7, limit / 3, limit - before} {
				if hits <= 0 || before+hits > limit {
					continue
				}
				want := refNearWithin(uint64(limit), uint64(before), uint64(hits))
				got := nearHits(limit, limit-before-hits, hits)
				if got != want {
					t.Fatalf("limit %d, before %d, hits %d: near %d, the reference %d", limit, before, hits, got, want)
				}
			}
		}
	}
	require.Zero(t, nearHits(10, 5, 0))
	require.Zero(t, nearHits(0, 0, 1))
}

// TestWithNearLimit: the Server reports the near-limit hits of what it
// admits, per rule, and nothing for denied, shadowed, refunded or
// zero-hit descriptors.
func TestWithNearLimit(t *testing.T) {
	cfg, err := ParseConfig(map[string][]byte{"n.yaml": []byte(`
domain: n
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: g
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: gcra}
`)})
	require.NoError(t, err)
	st := memstore.MustNew()
	defer st.Close()
	var mu sync.Mutex
	got := map[string]uint64{}
	clk := core.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	s, err := New(st, cfg, WithLimiterOptions(core.WithClock(clk)), WithNearLimit(func(p string, n uint64) {
		mu.Lock()
		got[p] += n
		mu.Unlock()
	}))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	call := func(r *pb.RateLimitRequest) {
		_, err := s.ShouldRateLimit(ctx, r)
		require.NoError(t, err)
	}
	for range 8 {
		call(request("n", desc("a", "x")))
	}
	require.Empty(t, got, "up to the threshold, nothing is near")
	call(request("n", desc("a", "x")))
	require.Equal(t, map[string]uint64{"rls:n.a": 1}, got)
	// a request the second descriptor denies charges (and reports) nothing
	zero := desc("a", "x")
	zero.HitsAddend = wrapperspb.UInt64(0)
	call(request("n", zero))
	call(request("n", desc("a", "y"), desc("a", "x"), desc("a", "x")))
	require.Equal(t, map[string]uint64{"rls:n.a": 1}, got)
	call(request("n", desc("a", "x"))) // 10th
	require.Equal(t, map[string]uint64{"rls:n.a": 2}, got)
	call(request("n", desc("a", "x"))) // 11th: denied
	require.Equal(t, map[string]uint64{"rls:n.a": 2}, got)
	// hits_addend 5 from 5 to 10 on a fresh key: 2 near (9 and 10)
	r := request("n", desc("a", "z"))
	r.HitsAddend = 5
	call(r)
	call(r)
	require.Equal(t, map[string]uint64{"rls:n.a": 4}, got)
	// shadow mode: within the limit near counts (threshold 4: the 5th);
	// over it nothing is consumed and nothing is near
	for range 7 {
		call(request("n", desc("s", "x")))
	}
	require.EqualValues(t, 1, got["rls:n.s"])
	// another algorithm: the 9th and 10th of a GCRA burst of 10
	for range 11 {
		call(request("n", desc("g", "x")))
	}
	require.EqualValues(t, 2, got["rls:n.g"])
}
