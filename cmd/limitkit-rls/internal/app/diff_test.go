package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/internal/redistest"
)

// ReferenceEnv names envoyproxy/ratelimit's server binary for
// TestDifferentialAgainstReference, built from its module:
//
//	GOBIN=/tmp/ref go install github.com/envoyproxy/ratelimit/src/service_cmd@latest
//	LIMITKIT_RLS_REFERENCE=/tmp/ref/service_cmd go test -run Differential ./cmd/limitkit-rls/...
const ReferenceEnv = "LIMITKIT_RLS_REFERENCE"

const diffConfig = `domain: diff
descriptors:
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: path
    value: /free
    rate_limit: {unlimited: true}
  - key: path
    value: /zero
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: user
    value: "vip*"
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: team
    value: "t*"
    share_threshold: true
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: client
    descriptors:
      - key: route
        rate_limit: {unit: day, requests_per_unit: 4, name: generic}
      - key: route
        value: special
        rate_limit:
          unit: day
          requests_per_unit: 10
          name: special
          replaces: [{name: generic}]
`

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startReference runs envoyproxy/ratelimit on cfgText over its own Redis.
func startReference(t *testing.T, bin, cfgText string) pb.RateLimitServiceClient {
	t.Helper()
	redisSrv := redistest.StartNode(t)
	root := t.TempDir()
	dir := filepath.Join(root, "rl", "config")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "diff.yaml"), []byte(cfgText), 0o600))
	grpcPort := freePort(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisSrv.Addr,
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_IGNOREDOTFILES=true",
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(freePort(t)), "DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(freePort(t)),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(grpcPort))
	var logs syncBuf
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if t.Failed() {
			out := logs.String()
			t.Logf("reference server's last output:\n%s", out[max(0, len(out)-4000):])
		}
	})
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := pb.NewRateLimitServiceClient(conn)
	eventually(t, func() bool {
		_, err := c.ShouldRateLimit(context.Background(), req("diff", "probe", "x"))
		return err == nil
	}, "the reference server did not start")
	return c
}

type step struct {
	name string
	r    *pb.RateLimitRequest
}

func diffScript() []step {
	var s []step
	add := func(name string, r *pb.RateLimitRequest) { s = append(s, step{name, r}) }
	for i := range 4 {
		add(fmt.Sprintf("ip a #%d", i), req("diff", "ip", "a"))
	}
	two := req("diff", "ip", "b")
	two.HitsAddend = 2
	add("ip b hits 2", two)
	look := req("diff", "ip", "b")
	look.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	add("ip b hits 0", look)
	add("ip b", req("diff", "ip", "b"))
	add("unlimited", req("diff", "path", "/free"))
	add("zero", req("diff", "path", "/zero"))
	add("unknown domain", req("nope", "ip", "a"))
	add("unmatched", req("diff", "other", "x"))
	for i := range 3 {
		add(fmt.Sprintf("wildcard vip1 #%d", i), req("diff", "user", "vip1"))
	}
	add("wildcard vip2", req("diff", "user", "vip2"))
	for i, v := range []string{"t1", "t2", "t3"} {
		add(fmt.Sprintf("share_threshold #%d", i), req("diff", "team", v))
	}
	for i := range 3 {
		add(fmt.Sprintf("shadow #%d", i), req("diff", "shadow", "s"))
	}
	nested := func(route string) *rlpb.RateLimitDescriptor {
		return &rlpb.RateLimitDescriptor{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "client", Value: "c"}, {Key: "route", Value: route}}}
	}
	add("replaces", &pb.RateLimitRequest{Domain: "diff", Descriptors: []*rlpb.RateLimitDescriptor{nested("x"), nested("special")}})
	for i := range 5 {
		add(fmt.Sprintf("nested generic #%d", i), &pb.RateLimitRequest{Domain: "diff", Descriptors: []*rlpb.RateLimitDescriptor{nested("x")}})
	}
	add("two admitted descriptors", req("diff", "ip", "c", "user", "vip3"))
	add("depth mismatch", &pb.RateLimitRequest{Domain: "diff", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: "d"}, {Key: "more", Value: "x"}}}}})
	return s
}

// TestDifferentialAgainstReference sends one script to envoyproxy/ratelimit
// and to limitkit-rls over the same fixed-window configuration and
// compares every answer: codes, current_limit, limit_remaining and
// duration_until_reset (within a second: the two servers read the clock
// apart). The script avoids the documented differences (a denied
// multi-descriptor request; hits of a denied request counted by the
// reference).
func TestDifferentialAgainstReference(t *testing.T) {
	bin := os.Getenv(ReferenceEnv)
	if bin == "" {
		t.Skipf("set %s to envoyproxy/ratelimit's service_cmd binary to compare with it", ReferenceEnv)
	}
	ref := startReference(t, bin, diffConfig)
	dir := t.TempDir()
	writeConfig(t, dir, diffConfig)
	lk := start(t, "-config", dir, "-headers=false").client
	ctx := context.Background()
	for _, st := range diffScript() {
		want, werr := ref.ShouldRateLimit(ctx, st.r)
		got, gerr := lk.ShouldRateLimit(ctx, st.r)
		require.Equal(t, werr == nil, gerr == nil, "%s: reference error %v, limitkit error %v", st.name, werr, gerr)
		if werr != nil {
			continue
		}
		require.Equal(t, want.OverallCode, got.OverallCode, st.name)
		require.Len(t, got.Statuses, len(want.Statuses), st.name)
		for i, w := range want.Statuses {
			g := got.Statuses[i]
			require.Equal(t, w.Code, g.Code, "%s: status %d", st.name, i)
			require.Equal(t, w.LimitRemaining, g.LimitRemaining, "%s: status %d remaining", st.name, i)
			require.Equal(t, w.GetCurrentLimit().GetRequestsPerUnit(), g.GetCurrentLimit().GetRequestsPerUnit(), "%s: status %d", st.name, i)
			require.Equal(t, w.GetCurrentLimit().GetUnit(), g.GetCurrentLimit().GetUnit(), "%s: status %d", st.name, i)
			require.Equal(t, w.GetCurrentLimit().GetName(), g.GetCurrentLimit().GetName(), "%s: status %d", st.name, i)
			require.Equal(t, w.DurationUntilReset == nil, g.DurationUntilReset == nil, "%s: status %d", st.name, i)
			if w.DurationUntilReset != nil {
				require.InDelta(t, w.DurationUntilReset.AsDuration().Seconds(), g.DurationUntilReset.AsDuration().Seconds(), time.Second.Seconds(), "%s: status %d", st.name, i)
			}
		}
	}
	// the documented difference: a request denied by one descriptor
	// charges the others at the reference, nothing here
	both := req("diff", "ip", "e", "path", "/zero")
	for range 3 {
		w, err := ref.ShouldRateLimit(ctx, both)
		require.NoError(t, err)
		g, err := lk.ShouldRateLimit(ctx, both)
		require.NoError(t, err)
		require.Equal(t, pb.RateLimitResponse_OVER_LIMIT, w.OverallCode)
		require.Equal(t, pb.RateLimitResponse_OVER_LIMIT, g.OverallCode)
	}
	w, err := ref.ShouldRateLimit(ctx, req("diff", "ip", "e"))
	require.NoError(t, err)
	g, err := lk.ShouldRateLimit(ctx, req("diff", "ip", "e"))
	require.NoError(t, err)
	require.Equal(t, pb.RateLimitResponse_OVER_LIMIT, w.OverallCode, "the reference charged ip=e (3 an hour) by the three denied requests")
	require.Equal(t, pb.RateLimitResponse_OK, g.OverallCode)
	require.Equal(t, uint32(2), g.Statuses[0].LimitRemaining, "limitkit charged ip=e only for this request")

	// the empty domain: both refuse
	_, werr := ref.ShouldRateLimit(ctx, req("", "ip", "a"))
	_, gerr := lk.ShouldRateLimit(ctx, req("", "ip", "a"))
	require.Error(t, werr)
	require.Error(t, gerr)
}
