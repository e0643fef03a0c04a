//go:build linux

package app

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/limitkit/limitkit/internal/redistest"
)

const loadConfig = `domain: load
descriptors:
  - key: ip
    rate_limit: {unit: year, requests_per_unit: 2000000000}
`

// redisCPU is the server's used_cpu_sys + used_cpu_user, in seconds.
func redisCPU(t *testing.T, s *redistest.Server) float64 {
	out, err := s.Do("INFO", "cpu")
	require.NoError(t, err)
	var sum float64
	for _, l := range strings.Split(out, "\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return sum
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times
// (100 on every architecture Go supports on Linux).
const clockTicks = 100

// procCPU is process pid's user + system CPU time, from /proc/<pid>/stat
// (10 ms resolution).
func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	// the command name, in parentheses, may hold spaces: fields count
	// from the last ')'
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14, utime
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15, stime
	require.NoError(t, err1)
	require.NoError(t, err2)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// peakRSS is process pid's peak resident set (VmHWM), in MiB.
func peakRSS(pid int) float64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// selfCPU is the test process's (the load generator's) user + system CPU.
func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawCodec passes pre-marshalled requests through and reads only an
// answer's overall_code, so that the load generator spends no CPU on
// protobuf: it shares the host's cores with the servers it measures.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" } // the servers see the usual content-type

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

// Unmarshal sets *v.(*bool) to whether the answer is overall_code OK:
// field 1, varint 1, the first two bytes of the message as protobuf's
// Go marshaller writes fields in number order (both servers use it).
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var head [2]byte
	n := 0
	for _, b := range data {
		n += copy(head[n:], b.ReadOnlyData())
		if n == len(head) {
			break
		}
	}
	*v.(*bool) = n == 2 && head == [2]byte{0x08, byte(pb.RateLimitResponse_OK)}
	return nil
}

const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// loadClient is a load generator's connection to one server.
type loadClient interface {
	// caller returns a function that sends msg (a marshalled
	// RateLimitRequest) and reports whether the answer was overall_code
	// OK; each of drive's goroutines has its own.
	caller(msg []byte) func() bool
}

// grpcCaller is the generator on grpc-go: the raw codec, and static 1 MB
// flow-control windows (no bandwidth-delay pings, which the server would
// answer too).
type grpcCaller struct{ conn *grpc.ClientConn }

func dialGRPC(t *testing.T, addr string) grpcCaller {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return grpcCaller{conn}
}

func (c grpcCaller) caller(msg []byte) func() bool {
	return func() bool {
		var ok bool
		err := c.conn.Invoke(context.Background(), shouldRateLimit, &msg, &ok)
		return err == nil && ok
	}
}

// Generators are the load generators TestSideBySideThroughput can drive
// a server with (LIMITKIT_RLS_GENERATORS, a comma-separated list; "h2"
// by default): "h2" is h2Caller, "h2i" h2Caller with indexed headers (as
// Envoy sends them), "grpc" grpcCaller.
var generators = map[string]func(t *testing.T, addr string) loadClient{
	"h2":   func(t *testing.T, addr string) loadClient { return dialH2(t, addr, false) },
	"h2i":  func(t *testing.T, addr string) loadClient { return dialH2(t, addr, true) },
	"grpc": func(t *testing.T, addr string) loadClient { return dialGRPC(t, addr) },
}

// drive sends requests from 64 goroutines for d, one descriptor each
// (ip, g<n>), each goroutine's request marshalled once, and returns the
// decisions answered OK and the other answers (errors or over the limit:
// the load's rule is never reached, so any is a failure). The calls carry
// no deadline (Envoy's do, timing each call on both sides, at the same
// cost for every server): the goroutines stop at the first answer after d.
func drive(c loadClient, d time.Duration) (ok, failed int64) {
	var nOK, nFailed atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 64 {
		b, err := proto.Marshal(req("load", "ip", "g"+strconv.Itoa(g)))
		if err != nil {
			panic(err) // a fixed message: cannot fail
		}
		call := c.caller(b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n, bad int64
			for !stop.Load() {
				if call() {
					n++
				} else {
					bad++
				}
			}
			nOK.Add(n)
			nFailed.Add(bad)
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return nOK.Load(), nFailed.Load()
}

// loadTarget is one server under load: its process, its Redis and a client.
type loadTarget struct {
	name   string
	pid    int
	redis  *redistest.Server
	gen    string // the load generator (generators)
	client loadClient
	// sums over the rounds
	decisions, failed           int64
	secs                        float64
	server, genCPU, redisCPUSum float64 // seconds of CPU
}

// dial returns a client of the gRPC server at addr once it answers.
func dial(t *testing.T, addr, domain string) pb.RateLimitServiceClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := pb.NewRateLimitServiceClient(conn)
	eventually(t, func() bool {
		_, err := c.ShouldRateLimit(context.Background(), req(domain, "ip", "probe"))
		return err == nil
	}, "the server at "+addr+" did not start")
	return c
}

// startProcess starts cmd, killed at the end of the test.
func startProcess(t *testing.T, cmd *exec.Cmd) {
	var logs syncBuf
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			out := logs.String()
			t.Logf("%s's last output:\n%s", cmd.Path, out[max(0, len(out)-4000):])
		}
	})
}

// buildRLS builds cmd/limitkit-rls into a temporary directory (or returns
// $LIMITKIT_RLS_BINARY).
func buildRLS(t *testing.T) string {
	if b := os.Getenv("LIMITKIT_RLS_BINARY"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "limitkit-rls")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/limitkit/limitkit/cmd/limitkit-rls").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// TestSideBySideThroughput measures, at 64 concurrent callers (one gRPC
// connection, one descriptor per request, 64 keys never over their
// limit), the decisions per second, each server process's CPU per
// decision (/proc/<pid>/stat), its Redis's CPU per decision (INFO cpu)
// and the load generator's (this process's getrusage) for
// envoyproxy/ratelimit (pipeline window 0 and 150µs) and limitkit-rls
// (exact with -redis-pipeline=false, exact pipelined as by default, and
// the fleet tier), each a separate process on its own
// redis-server. The targets are measured round-robin,
// LIMITKIT_RLS_ROUNDS times (default 3) for LIMITKIT_RLS_SECONDS each
// (default 5, after a 1 s warm-up), so that the host's load falls on all
// of them alike. LIMITKIT_RLS_BASELINE names another limitkit-rls binary
// (a baseline build) measured in the same rounds. The load generator is
// h2Caller; LIMITKIT_RLS_GENERATORS=h2,grpc measures every server with
// each generator in the same rounds (grpc: grpc-go with the raw codec).
// LIMITKIT_RLS_ONLY limits the servers measured (see selected).
//
// It asserts nothing about speed; it logs the figures. It fails when any
// answer was an error or not OK (the rule is never reached), so that no
// figure counts failures as decisions. Skipped without
// LIMITKIT_RLS_REFERENCE and LIMITKIT_RLS_SIDE_BY_SIDE=1.
func TestSideBySideThroughput(t *testing.T) {
	ref := os.Getenv(ReferenceEnv)
	if ref == "" || os.Getenv("LIMITKIT_RLS_SIDE_BY_SIDE") != "1" {
		t.Skipf("set %s and LIMITKIT_RLS_SIDE_BY_SIDE=1 to measure", ReferenceEnv)
	}
	rounds, secs := 3, 5
	if v, err := strconv.Atoi(os.Getenv("LIMITKIT_RLS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := strconv.Atoi(os.Getenv("LIMITKIT_RLS_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	// the generator collects as seldom as the servers (GCPercent)
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent))
	gens := []string{"h2"}
	if v := os.Getenv("LIMITKIT_RLS_GENERATORS"); v != "" {
		gens = strings.Split(v, ",")
		for _, g := range gens {
			require.Contains(t, generators, g, "LIMITKIT_RLS_GENERATORS: h2, h2i or grpc")
		}
	}
	bin := buildRLS(t)
	var targets []*loadTarget
	for _, window := range []string{"0", "150us"} {
		if !selected("envoyproxy/ratelimit window=" + window) {
			continue
		}
		s := redistest.StartNode(t)
		root := t.TempDir()
		dir := filepath.Join(root, "rl", "config")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "load.yaml"), []byte(loadConfig), 0o600))
		port := freePort(t)
		cmd := exec.Command(ref)
		cmd.Env = append(os.Environ(), "USE_STATSD=false", "LOG_LEVEL=error", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+s.Addr,
			"REDIS_PIPELINE_WINDOW="+window, "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=rl",
			"HOST=127.0.0.1", "PORT="+strconv.Itoa(freePort(t)), "DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(freePort(t)),
			"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(port))
		startProcess(t, cmd)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		dial(t, addr, "load") // waits until it answers
		for _, g := range gens {
			targets = append(targets, &loadTarget{name: "envoyproxy/ratelimit window=" + window, gen: g, pid: cmd.Process.Pid, redis: s,
				client: generators[g](t, addr)})
		}
	}
	type rlsRun struct {
		name, bin string
		extra     []string
	}
	// each mode of each binary; the flags are spelled out, so that a
	// baseline built before pipelining became the default is measured alike
	modes := []struct {
		name  string
		extra []string
	}{
		{"-redis-pipeline=false", []string{"-redis-pipeline=false"}},
		{"exact (pipelined)", []string{"-redis-pipeline"}},
		{"-sync 100ms", []string{"-sync", "100ms", "-redis-pipeline"}},
	}
	bins := [][2]string{{"limitkit-rls", bin}}
	if base := os.Getenv("LIMITKIT_RLS_BASELINE"); base != "" {
		bins = append(bins, [2]string{"baseline", base})
	}
	var runs []rlsRun
	for _, b := range bins {
		for _, m := range modes {
			runs = append(runs, rlsRun{b[0] + " " + m.name, b[1], m.extra})
		}
	}
	for _, r := range runs {
		if !selected(r.name) {
			continue
		}
		s := redistest.StartNode(t)
		dir := t.TempDir()
		writeConfig(t, dir, loadConfig)
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		cmd := exec.Command(r.bin, append([]string{"-addr", addr, "-metrics-addr", "", "-config", dir, "-redis", s.Addr,
			"-headers=false", "-store-timeout", "1s"}, r.extra...)...)
		startProcess(t, cmd)
		dial(t, addr, "load")
		for _, g := range gens {
			targets = append(targets, &loadTarget{name: r.name, gen: g, pid: cmd.Process.Pid, redis: s, client: generators[g](t, addr)})
		}
	}
	d := time.Duration(secs) * time.Second
	load0 := loadAvg()
	for round := range rounds {
		for i := range targets {
			// rotate the order each round: no target always follows the same one
			tg := targets[(i+round)%len(targets)]
			drive(tg.client, time.Second) // warm up
			r0, s0, c0 := redisCPU(t, tg.redis), procCPU(t, tg.pid), selfCPU(t)
			t0 := time.Now()
			n, failed := drive(tg.client, d)
			el := time.Since(t0).Seconds()
			r1, s1, c1 := redisCPU(t, tg.redis), procCPU(t, tg.pid), selfCPU(t)
			tg.decisions += n
			tg.failed += failed
			tg.secs += el
			tg.redisCPUSum += r1 - r0
			tg.server += (s1 - s0).Seconds()
			tg.genCPU += (c1 - c0).Seconds()
			t.Logf("round %d %-30s %-4s %8.0f decisions/s", round, tg.name, tg.gen, float64(n)/el)
		}
	}
	t.Logf("%-30s %-4s %12s %14s %14s %14s %9s", "server", "gen", "decisions/s", "server CPU", "Redis CPU", "client CPU", "peak RSS")
	t.Logf("%-30s %-4s %12s %14s %14s %14s %9s", "", "", "", "µs/decision", "µs/decision", "µs/decision", "MiB")
	for _, tg := range targets {
		n := float64(tg.decisions)
		t.Logf("%-30s %-4s %12.0f %14.2f %14.2f %14.2f %9.1f", tg.name, tg.gen, n/tg.secs, tg.server/n*1e6, tg.redisCPUSum/n*1e6, tg.genCPU/n*1e6, peakRSS(tg.pid))
	}
	for _, tg := range targets {
		require.Zero(t, tg.failed, "%s (%s): answers that were errors or over the limit", tg.name, tg.gen)
	}
	t.Logf("load average before: %s, after: %s", load0, loadAvg())
}

// selected reports whether TestSideBySideThroughput measures the server
// named name: LIMITKIT_RLS_ONLY, when set, is a comma-separated list of
// substrings, one of which the name must hold (e.g. "sync" for the fleet
// tier's runs only); unset, every server is measured.
func selected(name string) bool {
	only := os.Getenv("LIMITKIT_RLS_ONLY")
	if only == "" {
		return true
	}
	for _, s := range strings.Split(only, ",") {
		if s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
