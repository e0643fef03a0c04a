package rls

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

func parse(text string) error {
	_, err := ParseConfig(map[string][]byte{"f.yaml": []byte(text)})
	return err
}

func TestConfigRefusals(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "empty file"},
		{"descriptors: []", "empty domain"},
		{"domain: d\nfoo: 1", "field foo not found"},
		{"domain: d\ndescriptors:\n  - value: v", "empty key"},
		{"domain: d\ndescriptors:\n  - key: k\n  - key: k", "duplicate descriptor composite key 'd.k'"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}", "invalid rate limit unit 'fortnight'"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, unlimited: true}", "should not specify rate limit unit when unlimited"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}", "replaces should not contain name"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}", "empty replaces entry"},
		{"domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true", "share_threshold can only be used with wildcard"},
		{"domain: d\ndescriptors:\n  - key: k\n    quota_mode: true", "quota_mode is not supported"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}", "not a uint32"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 3000000000}", "at most 2147483647"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}", "not a uint32"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: magic}", "magic"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, algorithm: gcra}", "need a limit"},
		{"domain: d\ndescriptors:\n  - key: " + strings.Repeat("x", 2000), "longer than 1024"},
		{"domain: d\ndescriptors: [[[", "yaml"},
	} {
		err := parse(tc.text)
		require.Error(t, err, tc.text)
		require.ErrorContains(t, err, tc.want, tc.text)
	}
	_, err := ParseConfig(map[string][]byte{"a.yaml": []byte("domain: d"), "b.yaml": []byte("domain: d")})
	require.ErrorContains(t, err, "duplicate domain 'd'")
}

func TestHostileConfigsBounded(t *testing.T) {
	// deep: 40 levels of nesting
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 40 {
		ind := strings.Repeat("  ", 2*i)
		fmt.Fprintf(&b, "%s  - key: k%d\n%s    descriptors:\n", ind, i, ind)
	}
	require.ErrorContains(t, parse(b.String()), "deeper than 32 levels")

	// many: 20,001 descriptors
	b.Reset()
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 20_001 {
		fmt.Fprintf(&b, "- {key: k%d}\n", i)
	}
	require.ErrorContains(t, parse(b.String()), "more than 20000 descriptors")

	// huge: over 16 MiB
	huge := "domain: d\n#" + strings.Repeat("x", 17<<20)
	require.ErrorContains(t, parse(huge), "at most 16777216")

	// alias bomb: yaml refuses excessive aliasing
	bomb := "domain: d\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
	require.Error(t, parse(bomb))
}

func TestHostileRequests(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	// a 1 MB value: one hashed key, bounded; the rule still applies
	big := strings.Repeat("v", 1<<20)
	for range 3 {
		r, err := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", big)))
		require.NoError(t, err)
		require.Equal(t, ok, r.OverallCode)
	}
	r, _ := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", big)))
	require.Equal(t, over, r.OverallCode)
	// values differing only past the inline bound do not share a key
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", big+"x")))
	require.Equal(t, ok, r.OverallCode)
	// a value matching a wildcard, 1 MB long
	r, err := s.ShouldRateLimit(ctx, request("edge", desc("user", "premium"+big)))
	require.NoError(t, err)
	require.Equal(t, uint32(4), r.Statuses[0].LimitRemaining)
	// too many entries
	d := &rlpb.RateLimitDescriptor{}
	for range 65 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	_, err = s.ShouldRateLimit(ctx, request("edge", d))
	require.ErrorContains(t, err, "at most 64")
	// a nil request and nil descriptors do not panic
	_, err = s.ShouldRateLimit(ctx, nil)
	require.Error(t, err)
	_, err = s.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlpb.RateLimitDescriptor{nil}})
	require.NoError(t, err)
	// 128 descriptors of one key: admitted all or nothing
	many := make([]*rlpb.RateLimitDescriptor, 128)
	for i := range many {
		many[i] = desc("remote_address", "many")
	}
	r, err = s.ShouldRateLimit(ctx, request("edge", many...))
	require.NoError(t, err)
	require.Equal(t, over, r.OverallCode)
	r, _ = s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "many")))
	require.Equal(t, uint32(2), r.Statuses[0].LimitRemaining, "the denied request charged nothing")
}

func TestExactUnderConcurrencyMultiDescriptor(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				r, err := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "hot"), desc("path", "/login")))
				require.NoError(t, err)
				if r.OverallCode == ok {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// /login (2 per hour) binds; the address (3 per minute) comes first
	// and is refunded for every denied request: exactly 2 charged
	require.Equal(t, int64(2), admitted.Load())
	r, _ := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "hot")))
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(0), r.Statuses[0].LimitRemaining)
}

func TestReloadKeepsUnchangedCounters(t *testing.T) {
	s, _ := newTestServer(t, testConfig)
	ctx := context.Background()
	ip := desc("remote_address", "r")
	s.ShouldRateLimit(ctx, request("edge", ip))
	// same rules: the counter carries on
	cfg, err := ParseConfig(map[string][]byte{"t.yaml": []byte(testConfig)})
	require.NoError(t, err)
	require.NoError(t, s.Reload(cfg))
	r, _ := s.ShouldRateLimit(ctx, request("edge", ip))
	require.Equal(t, uint32(1), r.Statuses[0].LimitRemaining)
	// a changed limit takes over the rule
	cfg, err = ParseConfig(map[string][]byte{"t.yaml": []byte(strings.Replace(testConfig, "requests_per_unit: 3", "requests_per_unit: 10", 1))})
	require.NoError(t, err)
	require.NoError(t, s.Reload(cfg))
	r, _ = s.ShouldRateLimit(ctx, request("edge", ip))
	require.Equal(t, ok, r.OverallCode)
	require.Equal(t, uint32(10), r.Statuses[0].CurrentLimit.RequestsPerUnit)
	// reloads while requests run: every answer comes from one config
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := s.ShouldRateLimit(ctx, request("edge", desc("remote_address", "x")))
				require.NoError(t, err)
				n := r.Statuses[0].CurrentLimit.RequestsPerUnit
				require.True(t, n == 3 || n == 10, n)
			}
		}()
	}
	a, _ := ParseConfig(map[string][]byte{"t.yaml": []byte(testConfig)})
	for i := range 50 {
		if i%2 == 0 {
			require.NoError(t, s.Reload(a))
		} else {
			require.NoError(t, s.Reload(cfg))
		}
	}
	close(stop)
	wg.Wait()
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = s.ShouldRateLimit(ctx, request("edge", ip))
	require.ErrorContains(t, err, "closed")
	require.ErrorIs(t, s.Reload(a), errClosedForTest())
}

func TestNewRefusesNil(t *testing.T) {
	_, err := New(nil, &Config{})
	require.ErrorContains(t, err, "nil store")
	st := memstore.MustNew()
	defer st.Close()
	_, err = New(st, nil)
	require.ErrorContains(t, err, "nil Config")
	s, err := New(st, &Config{})
	require.NoError(t, err)
	r, err := s.ShouldRateLimit(context.Background(), request("any", desc("a", "b")))
	require.NoError(t, err)
	require.Equal(t, ok, r.OverallCode)
}

func errClosedForTest() error { return core.ErrClosed }

// TestCounterKeyBounded: a counter key never carries a client's value
// longer than the inline bound into the store, and distinct descriptors
// never share a key.
func TestCounterKeyBounded(t *testing.T) {
	big := strings.Repeat("v", 1<<20)
	e := func(k, v string) []*rlpb.RateLimitDescriptor_Entry {
		return []*rlpb.RateLimitDescriptor_Entry{{Key: k, Value: v}}
	}
	k1 := counterKey("d", e("k", big), nil)
	require.LessOrEqual(t, len(k1), maxKeyInline)
	require.NotEqual(t, k1, counterKey("d", e("k", big+"x"), nil))
	require.NotEqual(t, counterKey("d", e("a_b", "c"), nil), counterKey("d", e("a", "b_c"), nil))
	require.NotEqual(t, counterKey("d", e("k", "v"), nil), counterKey("e", e("k", "v"), nil)) // the overrides: domain first
	require.NotEqual(t, counterKey("", e("d", "k"), nil), counterKey("d", e("k", ""), nil))
	require.NotEqual(t, counterKey("d", e("k", "v"), nil), counterKey("d", e("k", "v"), []string{"v"}))
}
