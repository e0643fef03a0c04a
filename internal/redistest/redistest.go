// Package redistest starts and stops real redis-server processes for tests:
// a single node ([StartNode]) and a three-master Redis Cluster
// ([StartCluster], or [StartClusterWithReplicas] with one replica per
// master, for failovers), on free loopback ports, never 6379.
//
// Every server runs with persistence off (--save "" --appendonly no), in a
// temporary directory, bound to 127.0.0.1, and is killed by t.Cleanup
// (also when the test fails or panics; on Linux the server is also killed
// if the test binary dies). Failure tests use [Server.Kill],
// [Server.Stop], [Server.Restart], [Server.Pause] (SIGSTOP: the socket
// accepts but nothing answers) and [Server.Resume].
//
// A cluster is joined with CLUSTER commands (as redis-cli --cluster
// create does, without its one-second sleeps); a fresh master still
// refuses to report cluster_state:ok for two seconds after it starts, so a
// cluster costs about two seconds of waiting. Tests that neither stop nor
// reconfigure its nodes can share one per test binary: [SharedCluster],
// with [Main] in the package's TestMain and a [KeyPrefix] per test.
//
// When redis-server is not on PATH, the test is skipped with a message
// saying so, unless the environment variable LIMITKIT_REQUIRE_REDIS=1 is
// set (CI sets it): then the test fails.
//
// The environment variable LIMITKIT_REDIS_SERVER names another server
// binary, e.g. valkey-server (CI runs the Redis-dependent packages once
// more with it); [ServerBinary] reports the choice. The helpers need no
// cluster tool: they form a Cluster with CLUSTER commands.
//
// The helpers poll the server's socket while waiting for readiness; that is
// the only waiting they do. They are for tests only.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv is the environment variable that turns a missing redis-server
// into a test failure instead of a skip.
const RequireEnv = "LIMITKIT_REQUIRE_REDIS"

// StoreTimeout is the store deadline (core.WithTimeout) for tests whose
// subject is not the deadline: core.DefaultTimeout's 50 ms is missed by a
// healthy redis-server on a loaded CI machine under -race, and a test
// that requires no error must not fail for it.
const StoreTimeout = 10 * time.Second

// ServerEnv is the environment variable that names the server binary
// (see the package doc).
const ServerEnv = "LIMITKIT_REDIS_SERVER"

// ServerBinary is the server binary the helpers start: $LIMITKIT_REDIS_SERVER,
// or redis-server.
func ServerBinary() string {
	if b := os.Getenv(ServerEnv); b != "" {
		return b
	}
	return "redis-server"
}

// readyTimeout bounds how long a server may take to accept PING.
const readyTimeout = 15 * time.Second

// Server is one redis-server process. Its methods are safe for concurrent
// use; they fail the test (t.Fatal) when the process cannot be controlled,
// so call them from the test goroutine.
type Server struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// Port is the TCP port; the cluster bus (cluster nodes only) uses
	// Port+10000.
	Port int

	t       owner
	dir     string
	args    []string
	cluster bool
	shared  bool // SharedCluster's: its process is not the test's to control

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
	paused bool
}

// lookup returns the path of bin, or skips/fails t when it is missing.
func lookup(t testing.TB, bin string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		msg := fmt.Sprintf("redistest: %s not found on PATH; install Redis (e.g. apt-get install redis-server redis-tools) to run the Redis tests, or name another binary in %s", bin, ServerEnv)
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s (%s=1 requires it)", msg, RequireEnv)
		}
		t.Skip(msg + " (set " + RequireEnv + "=1 to make this a failure)")
	}
	return p
}

// StartNode starts a stand-alone redis-server and returns it once it
// answers PING. extraArgs are appended to the command line (e.g.
// "--maxmemory", "10mb"). The server is killed when the test ends.
func StartNode(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	bin := lookup(t, ServerBinary())
	s := newServer(t, bin, false, extraArgs)
	return s
}

// StartSentinel starts a redis-server in Sentinel mode (quorum 1)
// monitoring master under name, and returns it once it answers PING and
// names master's address for name.
func StartSentinel(t testing.TB, master *Server, name string) *Server {
	t.Helper()
	bin := lookup(t, ServerBinary())
	s := newServerConf(t, bin, false, func(dir string) []string {
		conf := filepath.Join(dir, "sentinel.conf")
		host, port, _ := net.SplitHostPort(master.Addr)
		if err := os.WriteFile(conf, []byte("sentinel monitor "+name+" "+host+" "+port+" 1\n"), 0o600); err != nil {
			t.Fatalf("redistest: write %s: %v", conf, err)
		}
		return []string{conf, "--sentinel"}
	}, nil)
	deadline := time.Now().Add(readyTimeout)
	for {
		addr, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
		if err == nil && addr != "" && addr != "*-1" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: sentinel %s does not know %s: %v", s.Addr, name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newServer(t owner, bin string, cluster bool, extraArgs []string) *Server {
	t.Helper()
	return newServerConf(t, bin, cluster, nil, extraArgs)
}

// newServerConf is newServer with the arguments first(dir) put before the
// flags (a config file, for Sentinel).
func newServerConf(t owner, bin string, cluster bool, first func(dir string) []string, extraArgs []string) *Server {
	t.Helper()
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(cluster)
		if err != nil {
			t.Fatalf("redistest: no free port: %v", err)
		}
		s := &Server{
			Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Port:    port,
			t:       t,
			dir:     dir,
			cluster: cluster,
		}
		s.args = []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
			"--daemonize", "no",
			"--protected-mode", "no",
			"--logfile", filepath.Join(dir, "redis.log"),
		}
		if cluster {
			s.args = append(s.args,
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000",
				// a replica's first sync starts at once, not after
				// the default 5 s wait for more replicas
				"--repl-diskless-sync-delay", "0")
		}
		s.args = append(s.args, extraArgs...)
		if first != nil {
			s.args = append(first(dir), s.args...)
		}
		s.args = append([]string{bin}, s.args...)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.cleanup)
			return s
		}
	}
	t.Fatalf("redistest: could not start redis-server: %v", lastErr)
	return nil
}

// freePort returns a loopback port that is free now (and, for cluster
// nodes, whose bus port +10000 is free too). It never returns 6379.
func freePort(cluster bool) (int, error) {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port == 6379 || port == 16379 {
			continue
		}
		if cluster {
			if port+10000 > 65535 || port+10000 == 6379 {
				continue
			}
			lb, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
			if err != nil {
				continue
			}
			_ = lb.Close()
		}
		return port, nil
	}
	return 0, errors.New("no usable port after 50 tries")
}

// start runs the process and waits until it answers PING.
func (s *Server) start() error {
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Dir = s.dir
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done, s.paused = cmd, done, false
	s.mu.Unlock()
	deadline := time.Now().Add(readyTimeout)
	for {
		if err := ping(s.Addr); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited at start-up: %s", s.Addr, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.killWait()
			return fmt.Errorf("redis-server on %s not ready after %v: %s", s.Addr, readyTimeout, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logTail returns the end of the server's log, for error messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// ping sends one PING over a fresh connection.
func ping(addr string) error {
	_, err := rawCommand(addr, "PING")
	return err
}

// rawCommand sends one inline command and returns the first reply line, or
// for a bulk string reply its body.
func rawCommand(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return strings.TrimPrefix(strings.TrimPrefix(line, "+"), ":"), nil
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// signal sends sig to the running process.
func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		s.t.Fatalf("redistest: %s is not running", s.Addr)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v to %s: %v", sig, s.Addr, err)
	}
}

// Kill kills the server with SIGKILL (no shutdown, connections reset) and
// waits for it to exit. Restart brings it back on the same port.
func (s *Server) Kill() {
	s.t.Helper()
	s.mustOwn("Kill")
	s.killWait()
}

func (s *Server) killWait() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill() // SIGKILL also ends a SIGSTOPped process
	<-done
}

// Stop shuts the server down with SIGTERM (a clean shutdown; persistence
// is off, so data is lost) and waits for it to exit.
func (s *Server) Stop() {
	s.t.Helper()
	s.mustOwn("Stop")
	s.mu.Lock()
	cmd, done, paused := s.cmd, s.done, s.paused
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts the server again on the same port and directory after
// Kill or Stop (a running server is killed first), and waits until it
// answers PING. A cluster node keeps its nodes.conf, so it rejoins its
// cluster.
func (s *Server) Restart() {
	s.t.Helper()
	s.mustOwn("Restart")
	s.killWait()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.start(); err == nil {
			return
		}
	}
	s.t.Fatalf("redistest: restart %s: %v", s.Addr, err)
}

// Pause freezes the server with SIGSTOP: its socket still accepts
// connections (the kernel completes the handshake) but no command is
// answered until Resume. The cleanup resumes and kills a paused server.
func (s *Server) Pause() {
	s.t.Helper()
	s.mustOwn("Pause")
	s.signal(syscall.SIGSTOP)
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
}

// Resume continues a server frozen by Pause.
func (s *Server) Resume() {
	s.t.Helper()
	s.mustOwn("Resume")
	s.signal(syscall.SIGCONT)
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// Running reports whether the process is alive (paused counts as alive).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func (s *Server) cleanup() {
	s.mu.Lock()
	cmd, paused := s.cmd, s.paused
	s.mu.Unlock()
	if cmd != nil && paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	s.killWait()
}

// mustOwn panics when s is a shared server: stopping or freezing it would
// break the other tests that use it.
func (s *Server) mustOwn(op string) {
	if s.shared {
		panic("redistest: " + op + " on a shared server (SharedCluster); start the test's own with StartNode or StartCluster")
	}
}

// Do sends one command over a fresh connection (outside any client pool)
// and returns the reply as text; for test set-up and inspection.
func (s *Server) Do(args ...string) (string, error) {
	return rawCommand(s.Addr, args...)
}

// ClientOptions returns go-redis options for s with ContextTimeoutEnabled
// set (so a context deadline bounds every socket read and write) and short
// timeouts suited to tests.
func (s *Server) ClientOptions() *redis.Options {
	return &redis.Options{
		Addr:                  s.Addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		// a test's hundreds of goroutines wait for a pooled
		// connection; on a loaded CI machine longer than go-redis's
		// default (ReadTimeout + 1 s). A context deadline still bounds
		// the wait.
		PoolTimeout:  30 * time.Second,
		WriteTimeout: 2 * time.Second,
	}
}

// NewClient returns a go-redis client for s (see ClientOptions), closed
// when the test ends.
func (s *Server) NewClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.ClientOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Cluster is a three-master Redis Cluster, without replicas
// ([StartCluster]) or with one replica per master
// ([StartClusterWithReplicas]).
type Cluster struct {
	// Nodes are the masters as created, in the order they were created
	// (after a failover, a replica is the master of its slots).
	Nodes []*Server
	// Replicas are the replicas as created, or none.
	Replicas []*Server
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr
	}
	return a
}

// StartCluster starts three cluster-enabled redis-server processes, joins
// them into one cluster (16384 slots split over three masters as
// redis-cli --cluster create splits them, no replicas) and returns once
// every node reports cluster_state:ok and knows all three nodes.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return startCluster(t, 0)
}

// StartClusterWithReplicas starts six cluster-enabled redis-server
// processes and joins them as three masters (Nodes, 16384 slots split
// over them) each with one replica (Replicas[i] replicates Nodes[i]), and
// returns once every node reports cluster_state:ok, knows all six nodes,
// and every replica's link to its master is up. For failover tests: kill
// or pause a master, then [Server.Failover] its replica with "TAKEOVER".
func StartClusterWithReplicas(t testing.TB) *Cluster {
	t.Helper()
	return startCluster(t, 1)
}

// startCluster joins the nodes with CLUSTER commands, as redis-cli
// --cluster create and add-node do (distinct config epochs, slots, MEET,
// REPLICATE), but polls for each step instead of sleeping a second
// between its checks as redis-cli does: a cluster is ready in a few
// hundred milliseconds instead of two to five seconds.
func startCluster(t testing.TB, replicas int) *Cluster {
	t.Helper()
	return joinCluster(t, t, replicas)
}

// joinCluster starts and joins a cluster whose servers o owns (their
// directories and cleanup); t is the test that asked for it.
func joinCluster(t testing.TB, o owner, replicas int) *Cluster {
	t.Helper()
	bin := lookup(t, ServerBinary())
	c := &Cluster{}
	for i := 0; i < 3; i++ {
		c.Nodes = append(c.Nodes, newServer(o, bin, true, nil))
	}
	for i := 0; i < replicas*3; i++ {
		c.Replicas = append(c.Replicas, newServer(o, bin, true, nil))
	}
	all := append(append([]*Server(nil), c.Nodes...), c.Replicas...)
	do := func(s *Server, args ...string) string {
		t.Helper()
		out, err := s.Do(args...)
		if err != nil {
			t.Fatalf("redistest: %s on %s: %v", strings.Join(args[:min(len(args), 2)], " "), s.Addr, err)
		}
		return out
	}
	for i, n := range all {
		do(n, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
	}
	for i, n := range c.Nodes {
		lo, hi := slotRange(i, len(c.Nodes))
		if _, err := n.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			// before Redis 7.0: one argument per slot
			args := []string{"CLUSTER", "ADDSLOTS"}
			for s := lo; s <= hi; s++ {
				args = append(args, strconv.Itoa(s))
			}
			do(n, args...)
		}
	}
	for _, n := range all[1:] {
		do(all[0], "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.Port))
	}
	if replicas > 0 {
		// a replica must know its master before CLUSTER REPLICATE
		waitKnown(t, all)
		for i, r := range c.Replicas {
			id := do(c.Nodes[i%3], "CLUSTER", "MYID")
			do(r, "CLUSTER", "REPLICATE", id)
		}
	}
	c.WaitReady(t)
	return c
}

// slotRange is the i-th of n contiguous slot ranges, split as redis-cli
// --cluster create splits them (for three masters 0-5460, 5461-10922,
// 10923-16383).
func slotRange(i, n int) (lo, hi int) {
	per := 16384.0 / float64(n)
	lo = 0
	if i > 0 {
		lo = int(math.Round(float64(i)*per-1)) + 1
	}
	hi = int(math.Round(float64(i+1)*per - 1))
	if i == n-1 {
		hi = 16383
	}
	return lo, hi
}

// waitKnown waits until every node of all knows every other.
func waitKnown(t testing.TB, all []*Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		var last string
		for _, n := range all {
			info, err := n.Do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(all))+"\r") {
				ok, last = false, fmt.Sprintf("%s: %v %s", n.Addr, err, info)
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster nodes do not know each other after 30s: %s", last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Failover runs CLUSTER FAILOVER [mode] on s, a replica ("FORCE" when its
// master is unreachable, "TAKEOVER" without the other masters' vote: the
// fastest and deterministic), and returns once s reports itself a master.
func (s *Server) Failover(t testing.TB, mode ...string) {
	t.Helper()
	if _, err := s.Do(append([]string{"CLUSTER", "FAILOVER"}, mode...)...); err != nil {
		t.Fatalf("redistest: CLUSTER FAILOVER on %s: %v", s.Addr, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := s.Do("INFO", "replication")
		if err == nil && strings.Contains(info, "role:master") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s not a master 30s after CLUSTER FAILOVER: %v %s", s.Addr, err, info)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitReady waits until every node reports cluster_state:ok and knows all
// the nodes, and every replica's link to its master is up (e.g. after a
// Restart).
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	all := append(append([]*Server(nil), c.Nodes...), c.Replicas...)
	for {
		ok := true
		var last string
		for _, n := range all {
			info, err := n.Do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(all))) {
				ok = false
				last = fmt.Sprintf("%s: %v %s", n.Addr, err, info)
				break
			}
		}
		for _, r := range c.Replicas {
			if !ok {
				break
			}
			info, err := r.Do("INFO", "replication")
			if err != nil || !strings.Contains(info, "master_link_status:up") {
				ok = false
				last = fmt.Sprintf("%s: %v %s", r.Addr, err, info)
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster not ready after 30s: %s", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ClusterOptions returns go-redis cluster options for c with
// ContextTimeoutEnabled set and short timeouts suited to tests.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		// a test's hundreds of goroutines wait for a pooled
		// connection; on a loaded CI machine longer than go-redis's
		// default (ReadTimeout + 1 s). A context deadline still bounds
		// the wait.
		PoolTimeout:  30 * time.Second,
		WriteTimeout: 2 * time.Second,
	}
}

// NewClient returns a go-redis cluster client for c, closed when the test
// ends.
func (c *Cluster) NewClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(c.ClusterOptions())
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Version returns the server's name and version from INFO server, e.g.
// "redis 7.0.15" or "valkey 8.0.1" (Valkey also reports the Redis
// version it is compatible with as redis_version; its own is
// valkey_version).
func (s *Server) Version() (string, error) {
	info, err := s.Do("INFO", "server")
	if err != nil {
		return "", err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	name := fields["server_name"]
	if name == "" {
		name = "redis"
	}
	if v := fields[name+"_version"]; v != "" {
		return name + " " + v, nil
	}
	return name + " " + fields["redis_version"], nil
}
