package redistest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// owner is what a server needs from its owner: a test (testing.TB), or
// the test binary for the shared servers (sharedOwner).
type owner interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatalf(format string, args ...any)
}

var shared struct {
	mu       sync.Mutex
	main     bool     // Main is running the tests
	cluster  *Cluster // SharedCluster's, once started
	cleanups []func() // run by Main after the tests, last first
	dirs     []string // removed by Main after the cleanups
	prefixes atomic.Int64
	prefix   sync.Map // testing.TB → its KeyPrefix; never deleted, so no
	// later test can get a finished one's prefix (or address)
}

// Main runs m's tests and then stops the servers that [SharedCluster]
// started, and returns the exit code for os.Exit. A package whose tests
// use SharedCluster calls it from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for i := len(shared.cleanups) - 1; i >= 0; i-- {
		shared.cleanups[i]()
	}
	for _, d := range shared.dirs {
		_ = os.RemoveAll(d)
	}
	shared.cleanups, shared.dirs, shared.cluster = nil, nil, nil
	return code
}

// SharedCluster returns the test binary's shared three-master Cluster (no
// replicas), started by the first test that asks for it and stopped by
// [Main] after the last test: a test that only sends commands to a
// cluster saves the two seconds a fresh one takes. It fails t when the
// package's TestMain does not call Main, and skips or fails t as
// [StartCluster] does when redis-server is missing. Safe for concurrent
// use.
//
// The tests that share it must not disturb one another: each keeps to
// keys of its own [KeyPrefix] (no FLUSHALL, no KEYS or DBSIZE over the
// whole cluster, no CONFIG SET, no CLIENT PAUSE, no SCRIPT FLUSH), and none
// stops, freezes or fails over a node ([Server.Kill], [Server.Stop],
// [Server.Restart], [Server.Pause] and [Server.Resume] panic on a shared
// server). A test that needs any of that starts its own with
// StartCluster.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatalf("redistest: SharedCluster needs the package's TestMain to call redistest.Main (func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) })")
	}
	if shared.cluster == nil {
		c := joinCluster(t, sharedOwner{t}, 0)
		for _, n := range c.Nodes {
			n.shared = true
		}
		shared.cluster = c
	}
	return shared.cluster
}

// KeyPrefix returns t's key prefix for a shared server: the same for
// every call with the same t, and one no other test or subtest of this
// test binary gets ("lk<n>:", n counting up, with neither '{' nor '}', so
// a Redis store's WithPrefix takes it). Pass it to the store's WithPrefix
// and put it before every key the test writes or reads itself. Safe for
// concurrent use.
func KeyPrefix(t testing.TB) string {
	if p, ok := shared.prefix.Load(t); ok {
		return p.(string)
	}
	p, _ := shared.prefix.LoadOrStore(t, fmt.Sprintf("lk%d:", shared.prefixes.Add(1)))
	return p.(string)
}

// sharedOwner owns SharedCluster's servers: their directories and
// cleanup outlive the test that started them (Main removes them), and a
// failure to start fails that test. Called with shared.mu held.
type sharedOwner struct{ t testing.TB }

func (o sharedOwner) Helper() { o.t.Helper() }

func (o sharedOwner) TempDir() string {
	d, err := os.MkdirTemp("", "redistest-shared-")
	if err != nil {
		o.t.Fatalf("redistest: temporary directory for a shared server: %v", err)
	}
	shared.dirs = append(shared.dirs, d)
	return d
}

func (o sharedOwner) Cleanup(f func()) { shared.cleanups = append(shared.cleanups, f) }

func (o sharedOwner) Fatalf(format string, args ...any) {
	o.t.Helper()
	o.t.Fatalf(strings.TrimSpace(format), args...)
}
