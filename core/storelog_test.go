package core_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func textLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func TestStoreFailureLogIsRateLimited(t *testing.T) {
	var buf syncBuffer
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	ms := &mapStore{states: map[string][]int64{}, err: errors.New("boom")}
	l, err := core.NewLimiter(ms, core.Policy{Name: "login", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(10)}},
		core.WithClock(clk), core.WithLogger(textLogger(&buf)), core.WithLogInterval(10*time.Second))
	require.NoError(t, err)
	ctx := context.Background()
	for range 3 {
		_, err := l.Allow(ctx, "k")
		require.Error(t, err)
	}
	lines := buf.lines()
	require.Len(t, lines, 1, "the first failure is logged at once, the next two are counted")
	assert.Equal(t, `level=ERROR msg="limitkit: store failed; requests denied (fail mode closed)" policy=login fail_mode=closed kind=other failures=1 interval=10s err=boom hint="the store answered with an error (a script error, a bad reply or a closed store): see err"`, lines[0])

	clk.Advance(9 * time.Second)
	_, _ = l.Allow(ctx, "k")
	assert.Len(t, buf.lines(), 1, "still within the interval")
	clk.Advance(time.Second)
	_, _ = l.Allow(ctx, "k")
	lines = buf.lines()
	require.Len(t, lines, 2)
	assert.Contains(t, lines[1], "failures=4", "the three counted since the first line and this one")

	ms.err = nil
	clk.Advance(time.Minute)
	_, err = l.Allow(ctx, "k")
	require.NoError(t, err)
	assert.Len(t, buf.lines(), 2, "a success logs nothing")
}

func TestStoreFailureLogKinds(t *testing.T) {
	refused := fmt.Errorf("redisstore: policy %q: %w", "p", &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "x"}})
	refused2 := fmt.Errorf("redisstore: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	tests := []struct {
		name  string
		err   error
		mode  core.FailMode
		want  []string
		block bool
	}{
		{"connection refused", refused2, core.FailOpen, []string{"kind=connection", "connection refused", "requests admitted without limiting (fail mode open)", "unreachable"}, false},
		{"dial error", refused, core.FailOpen, []string{"kind=connection"}, false},
		{"timeout", nil, core.FailClosed, []string{"kind=timeout", "context deadline exceeded", "requests denied", "WithTimeout"}, true},
		{"script error", errors.New("redisstore: ERR user_script:1: Script attempted to access nonexistent global variable"), core.FailOpen, []string{"kind=other", "user_script"}, false},
		{"circuit open", fmt.Errorf("fleet: %w", core.ErrCircuitOpen), core.FailOpen, []string{"kind=circuit_open", "breaker"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf syncBuffer
			ms := &mapStore{states: map[string][]int64{}, err: tt.err, block: tt.block}
			l, err := core.NewLimiter(ms, core.Policy{Name: "p", FailMode: tt.mode, Limits: []core.Limit{core.PerMinute(10)}},
				core.WithLogger(textLogger(&buf)), core.WithTimeout(time.Millisecond))
			require.NoError(t, err)
			_, err = l.Allow(context.Background(), "k")
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, buf.String(), w)
			}
		})
	}
}

func TestStoreFailureLogOptions(t *testing.T) {
	p := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(10)}}
	failing := &mapStore{states: map[string][]int64{}, err: errors.New("boom")}

	t.Run("default is slog.Default at the time of the line", func(t *testing.T) {
		l, err := core.NewLimiter(failing, p)
		require.NoError(t, err)
		var buf syncBuffer
		old := slog.Default()
		slog.SetDefault(textLogger(&buf))
		defer slog.SetDefault(old)
		_, _ = l.Allow(context.Background(), "k")
		assert.Contains(t, buf.String(), "limitkit: store failed")
	})
	t.Run("WithLogger(nil) silences", func(t *testing.T) {
		l, err := core.NewLimiter(failing, p, core.WithLogger(nil))
		require.NoError(t, err)
		var buf syncBuffer
		old := slog.Default()
		slog.SetDefault(textLogger(&buf))
		defer slog.SetDefault(old)
		_, err = l.Allow(context.Background(), "k")
		require.Error(t, err, "the error is still returned")
		assert.Empty(t, buf.String())
	})
	t.Run("bad interval", func(t *testing.T) {
		for _, d := range []time.Duration{0, -time.Second} {
			_, err := core.NewLimiter(failing, p, core.WithLogInterval(d))
			assert.ErrorContains(t, err, "WithLogInterval")
		}
	})
	t.Run("huge interval logs once", func(t *testing.T) {
		var buf syncBuffer
		clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
		l, err := core.NewLimiter(failing, p, core.WithClock(clk), core.WithLogger(textLogger(&buf)), core.WithLogInterval(time.Duration(1<<62)))
		require.NoError(t, err)
		for range 3 {
			_, _ = l.Allow(context.Background(), "k")
			clk.Advance(time.Hour)
		}
		assert.Len(t, buf.lines(), 1)
	})
	t.Run("a clock before 1970 still logs the first failure", func(t *testing.T) {
		var buf syncBuffer
		clk := core.NewManualClock(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))
		l, err := core.NewLimiter(failing, p, core.WithClock(clk), core.WithLogger(textLogger(&buf)))
		require.NoError(t, err)
		_, _ = l.Allow(context.Background(), "k")
		assert.Len(t, buf.lines(), 1)
	})
}

// TestStoreFailureLogConcurrent: many goroutines failing at once write one
// line per interval, and no failure is lost from the counts.
func TestStoreFailureLogConcurrent(t *testing.T) {
	var buf syncBuffer
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l, err := core.NewLimiter(&errStore{err: errors.New("boom")}, core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(10)}},
		core.WithClock(clk), core.WithLogger(textLogger(&buf)))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = l.Allow(context.Background(), "k")
			}
		}()
	}
	wg.Wait()
	require.Len(t, buf.lines(), 1)
	clk.Advance(10 * time.Second)
	_, _ = l.Allow(context.Background(), "k")
	lines := buf.lines()
	require.Len(t, lines, 2)
	assert.Equal(t, 801, failures(t, lines[0])+failures(t, lines[1]), "every failure is counted in exactly one line")
}

// failures returns the failures= count of a log line.
func failures(t *testing.T, line string) int {
	t.Helper()
	var n int
	i := strings.Index(line, "failures=")
	require.GreaterOrEqual(t, i, 0, line)
	_, err := fmt.Sscanf(line[i:], "failures=%d", &n)
	require.NoError(t, err)
	return n
}

// errStore fails every call; safe for concurrent use.
type errStore struct{ err error }

func (s *errStore) Take(context.Context, string, *core.Policy, time.Time, int64) (core.Decision, error) {
	return core.Decision{}, s.err
}

// A Limiter logs its store's failures through slog by default, at most one
// line per interval with the count since the previous one; WithLogger
// picks the logger (nil silences).
func ExampleWithLogger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	down := &errStore{err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	l := core.MustNewLimiter(down, core.Policy{Name: "login", FailMode: core.FailClosed, Limits: []core.Limit{core.PerMinute(5)}},
		core.WithLogger(logger), core.WithLogInterval(time.Minute))
	for range 3 {
		d, _ := l.Allow(context.Background(), "198.51.100.7")
		fmt.Println("allowed:", d.Allowed, "degraded:", d.Degraded)
	}
	// Output:
	// level=ERROR msg="limitkit: store failed; requests denied (fail mode closed)" policy=login fail_mode=closed kind=connection failures=1 interval=1m0s err="dial tcp: connection refused" hint="the store is unreachable (refused, reset or unknown host): check that it is running and that the address is right"
	// allowed: false degraded: true
	// allowed: false degraded: true
	// allowed: false degraded: true
}
