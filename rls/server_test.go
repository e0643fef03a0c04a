package rls

import (
	"context"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

const testConfig = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: path
    value: /login
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: path
    value: /free
    rate_limit:
      unlimited: true
  - key: path
    value: /blocked
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: path
    value: /shadow
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: user
    value: premium-gold
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: user
    value: "premium*"
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: team
    value: "a*"
    share_threshold: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: client
    descriptors:
      - key: route
        rate_limit:
          unit: minute
          requests_per_unit: 4
          name: route_limit
      - key: route
        value: special
        rate_limit:
          unit: minute
          requests_per_unit: 10
          name: special
          replaces:
            - name: generic
  - key: generic
    rate_limit:
      unit: minute
      requests_per_unit: 1
      name: generic
  - key: bucket
    rate_limit:
      unit: minute
      requests_per_unit: 4
      algorithm: token_bucket
`

// epoch is a fixed instant 10 s into a minute.
var epoch = time.Unix(1_800_000_010, 0)

func newTestServer(t *testing.T, cfgText string, opts ...Option) (*Server, *core.ManualClock) {
	t.Helper()
	clock := core.NewManualClock(epoch)
	cfg, err := ParseConfig(map[string][]byte{"test.yaml": []byte(cfgText)})
	require.NoError(t, err)
	st := memstore.MustNew(memstore.WithClock(clock))
	t.Cleanup(func() { st.Close() })
	s, err := New(st, cfg, append([]Option{WithLimiterOptions(core.WithClock(clock))}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, clock
}

func desc(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func request(domain string, ds ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

func codesOf(r *pb.RateLimitResponse) []pb.RateLimitResponse_Code {
	out := []pb.RateLimitResponse_Code{r.OverallCode}
	for _, s := range r.Statuses {
		out = append(out, s.Code)
	}
	return out
}

const (
	ok   = pb.RateLimitResponse_OK
	over = pb.RateLimitResponse_OVER_LIMIT
)

func TestFixedWindowAsReference(t *testing.T) {
	s, clock := newTestServer(t, testConfig)
	ctx := context.Background()
	for i, want := range []uint32{2, 1, 0} {
		r, err := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "10.0.0.1")))
		require.NoError(t, err)
		require.Equal(t, ok, r.OverallCode, "request %d", i)
		st := r.Statuses[0]
		require.Equal(t, want, st.LimitRemaining)
		require.Equal(t, uint32(3), st.CurrentLimit.RequestsPerUnit)
		require.Equal(t, pb.RateLimitResponse_RateLimit_MINUTE, st.CurrentLimit.Unit)
		require.Equal(t, 50*time.Second, st.DurationUntilReset.AsDuration(), "the epoch-aligned minute's rest")
	}
	r, err := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "10.0.0.1")))
	require.NoError(t, err)
	require.Equal(t, []pb.RateLimitResponse_Code{over, over}, codesOf(r))
	require.Zero(t, r.Statuses[0].LimitRemaining)
	// another address has its own counter
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "10.0.0.2")))
	require.Equal(t, ok, r.OverallCode)
	// the next minute, aligned to the epoch, starts afresh
	clock.Advance(50 * time.Second)
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "10.0.0.1")))
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(2), r.Statuses[0].LimitRemaining)
	require.Equal(t, 60*time.Second, r.Statuses[0].DurationUntilReset.AsDuration())
}

func TestUnmatchedUnknownDomainUnlimitedZero(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	r, err := s.ShouldRateLimit(ctx, request("nope", desc("remote_address", "1")))
	require.NoError(t, err)
	require.Equal(t, []pb.RateLimitResponse_Code{ok, ok}, codesOf(r))
	require.Nil(t, r.Statuses[0].CurrentLimit)

	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("nothing", "x"), &rlpb.RateLimitDescriptor{}))
	require.Equal(t, []pb.RateLimitResponse_Code{ok, ok, ok}, codesOf(r))

	for range 5 {
		r, _ = s.ShouldRateLimit(ctx, request("edge", desc("path", "/free")))
		require.Equal(t, ok, r.OverallCode)
		require.Equal(t, uint32(1<<32-1), r.Statuses[0].LimitRemaining)
		require.Nil(t, r.Statuses[0].CurrentLimit)
	}
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("path", "/blocked")))
	require.Equal(t, []pb.RateLimitResponse_Code{over, over}, codesOf(r))
	// a depth mismatch matches nothing: more entries than the rule's level
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("path", "/blocked", "x", "y")))
	require.Equal(t, ok, r.OverallCode)
	require.Nil(t, r.Statuses[0].CurrentLimit)
}

func TestBadRequests(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	_, err := s.ShouldRateLimit(ctx, request("", desc("a", "b")))
	require.ErrorContains(t, err, "domain must not be empty")
	_, err = s.ShouldRateLimit(ctx, request("edge"))
	require.ErrorContains(t, err, "descriptor list must not be empty")
	many := make([]*rlpb.RateLimitDescriptor, 10_000)
	for i := range many {
		many[i] = desc("remote_address", "10.0.0.9")
	}
	_, err = s.ShouldRateLimit(ctx, request("edge", many...))
	require.ErrorContains(t, err, "at most 128")
	// nothing was charged by the refused request
	r, _ := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "10.0.0.9")))
	require.Equal(t, uint32(2), r.Statuses[0].LimitRemaining)
}

func TestShadowModeNeverDenies(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	for range 3 {
		r, err := s.ShouldRateLimit(ctx, request("edge", desc("path", "/shadow")))
		require.NoError(t, err)
		require.Equal(t, []pb.RateLimitResponse_Code{ok, ok}, codesOf(r))
	}
}

func TestWildcardsAndShareThreshold(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	// user premium*: a counter per value (the reference keys by the value)
	for range 5 {
		r, _ := s.ShouldRateLimit(ctx, request("edge", desc("user", "premium-1")))
		require.Equal(t, ok, r.OverallCode)
	}
	r, _ := s.ShouldRateLimit(ctx, request("edge", desc("user", "premium-1")))
	require.Equal(t, over, r.OverallCode)
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("user", "premium-2")))
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(5), r.Statuses[0].CurrentLimit.RequestsPerUnit)
	// the exact key_value wins over a wildcard that also matches
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("user", "premium-gold")))
	require.Equal(t, uint32(1), r.Statuses[0].CurrentLimit.RequestsPerUnit)
	// team a*, share_threshold: every matching value shares one counter
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("team", "alpha")))
	require.Equal(t, ok, r.OverallCode)
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("team", "apex")))
	require.Equal(t, ok, r.OverallCode)
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("team", "avocado")))
	require.Equal(t, over, r.OverallCode)
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("team", "beta")))
	require.Equal(t, ok, r.OverallCode)
	require.Nil(t, r.Statuses[0].CurrentLimit)
}

func TestReplaces(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	// generic (1/min) alone
	r, _ := s.ShouldRateLimit(ctx, request("edge", desc("generic", "g")))
	require.Equal(t, ok, r.OverallCode)
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("generic", "g")))
	require.Equal(t, over, r.OverallCode)
	// beside "special", which replaces it, generic is not checked
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("generic", "g"), desc("client", "c", "route", "special")))
	require.Equal(t, []pb.RateLimitResponse_Code{ok, ok, ok}, codesOf(r))
	require.Nil(t, r.Statuses[0].CurrentLimit)
	require.Equal(t, "special", r.Statuses[1].CurrentLimit.Name)
}

// TestDeniedRequestChargesNothing: the reference increments every
// descriptor of a request even when another denies it; limitkit refunds.
func TestDeniedRequestChargesNothing(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	login := desc("path", "/login") // 2 per hour
	ip := desc("remote_address", "10.1.1.1")
	r, _ := s.ShouldRateLimit(ctx, request("edge", ip, login))
	require.Equal(t, []pb.RateLimitResponse_Code{ok, ok, ok}, codesOf(r))
	r, _ = s.ShouldRateLimit(ctx, request("edge", ip, login))
	require.Equal(t, []pb.RateLimitResponse_Code{ok, ok, ok}, codesOf(r))
	// login is spent: the request is denied and the IP is not charged
	for range 4 {
		r, _ = s.ShouldRateLimit(ctx, request("edge", ip, login))
		require.Equal(t, []pb.RateLimitResponse_Code{over, ok, over}, codesOf(r))
		require.Equal(t, uint32(1), r.Statuses[0].LimitRemaining, "the refunded IP reports its room")
	}
	r, _ = s.ShouldRateLimit(ctx, request("edge", ip))
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(0), r.Statuses[0].LimitRemaining, "one IP unit was left after two admitted requests")
	// a requests_per_unit 0 rule denies too, and refunds the ones before it
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "10.1.1.3"), desc("path", "/blocked")))
	require.Equal(t, []pb.RateLimitResponse_Code{over, ok, over}, codesOf(r))
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "10.1.1.3")))
	require.Equal(t, uint32(2), r.Statuses[0].LimitRemaining, "the request denied by the zero rule charged nothing")
	// descriptors after the denying one are peeked, not charged
	other := desc("remote_address", "10.1.1.2")
	r, _ = s.ShouldRateLimit(ctx, request("edge", login, other))
	require.Equal(t, []pb.RateLimitResponse_Code{over, over, ok}, codesOf(r))
	r, _ = s.ShouldRateLimit(ctx, request("edge", other))
	require.Equal(t, uint32(2), r.Statuses[0].LimitRemaining)
}

func TestHitsAddend(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	ip := desc("remote_address", "10.2.2.2")
	req := request("edge", ip)
	req.HitsAddend = 2
	r, _ := s.ShouldRateLimit(ctx, req)
	require.Equal(t, uint32(1), r.Statuses[0].LimitRemaining)
	// per-descriptor 0: a look, nothing charged, OK at the limit
	d0 := desc("remote_address", "10.2.2.2")
	d0.HitsAddend = wrapperspb.UInt64(0)
	r, _ = s.ShouldRateLimit(ctx, request("edge", d0))
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(1), r.Statuses[0].LimitRemaining)
	// extremes: over any limit, nothing wraps, nothing charged
	for _, h := range []uint64{1<<32 - 1, 1<<64 - 1} {
		d := desc("remote_address", "10.2.2.2")
		d.HitsAddend = wrapperspb.UInt64(h)
		r, err := s.ShouldRateLimit(ctx, request("edge", d))
		require.NoError(t, err)
		require.Equal(t, over, r.OverallCode)
	}
	req = request("edge", desc("remote_address", "10.2.2.2"))
	req.HitsAddend = 1<<32 - 1
	r, _ = s.ShouldRateLimit(ctx, req)
	require.Equal(t, over, r.OverallCode)
	r, _ = s.ShouldRateLimit(ctx, request("edge", ip))
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(0), r.Statuses[0].LimitRemaining)
}

func TestLimitOverride(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	d := desc("anything", "x")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	r, err := s.ShouldRateLimit(ctx, request("edge", d))
	require.NoError(t, err)
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(1), r.Statuses[0].CurrentLimit.RequestsPerUnit)
	r, _ = s.ShouldRateLimit(ctx, request("edge", d))
	require.Equal(t, over, r.OverallCode)
	d.Limit.Unit = 99
	_, err = s.ShouldRateLimit(ctx, request("edge", d))
	require.ErrorContains(t, err, "unknown unit")
}

func TestHeaders(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	hdr := func(r *pb.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, h := range r.ResponseHeadersToAdd {
			m[h.Key] = h.Value
		}
		return m
	}
	r, _ := s.ShouldRateLimit(ctx, request("edge", desc("path", "/login")))
	reset := "1800000060"
	require.Equal(t, map[string]string{"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": "1800003600"}, hdr(r))
	s.ShouldRateLimit(ctx, request("edge", desc("path", "/login")))
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "1"), desc("path", "/login")))
	require.Equal(t, map[string]string{"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1800003600", "Retry-After": "3590"}, hdr(r))
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "1")))
	require.Equal(t, reset, hdr(r)["X-Ratelimit-Reset"])

	off, _ := newTestServer(t, testConfig, WithHeaders(false))
	r, _ = off.ShouldRateLimit(ctx, request("edge", desc("path", "/login")))
	require.Empty(t, r.ResponseHeadersToAdd)
}

// TestHeadersOffAnswersAlike: -headers=false changes nothing in an answer
// but its response headers, whatever the number of descriptors (one is
// built in its own smaller allocation, oneAnswer): the same conversation
// with headers on and off gives the same statuses.
func TestHeadersOffAnswersAlike(t *testing.T) {
	on, clockOn := newTestServer(t, testConfig)
	off, clockOff := newTestServer(t, testConfig, WithHeaders(false))
	ctx := context.Background()
	reqs := []*pb.RateLimitRequest{
		request("edge", desc("path", "/login")),
		request("edge", desc("remote_address", "1")),
		request("edge", desc("path", "/free")),
		request("edge", desc("path", "/blocked")),
		request("edge", desc("path", "/shadow")),
		request("edge", desc("remote_address", "1"), desc("path", "/login")),
		request("edge", desc("nothing", "matches")),
		request("edge", desc("path", "/login")),
		request("edge", desc("remote_address", "1")),
	}
	for i, req := range reqs {
		a, err := on.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		b, err := off.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		require.Empty(t, b.ResponseHeadersToAdd, "request %d", i)
		a.ResponseHeadersToAdd = nil
		require.Len(t, b.Statuses, len(req.Descriptors), "request %d", i)
		require.True(t, proto.Equal(a, b), "request %d: headers on %v, off %v", i, a, b)
		clockOn.Advance(7 * time.Second)
		clockOff.Advance(7 * time.Second)
	}
}

func TestOtherAlgorithm(t *testing.T) {
	s, clock := newTestServer(t, testConfig)
	ctx := context.Background()
	for range 4 {
		r, _ := s.ShouldRateLimit(ctx, request("edge", desc("bucket", "b")))
		require.Equal(t, ok, r.OverallCode)
	}
	r, _ := s.ShouldRateLimit(ctx, request("edge", desc("bucket", "b")))
	require.Equal(t, over, r.OverallCode)
	clock.Advance(15 * time.Second) // one token back
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("bucket", "b")))
	require.Equal(t, ok, r.OverallCode)
}
