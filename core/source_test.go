package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// table is a LimitSource over a map, standing in for a database table:
// requests per minute by identity, and a count of lookups.
type table struct {
	mu    sync.Mutex
	rows  map[string]int64
	calls atomic.Int64
	err   error
}

func (tb *table) set(id string, n int64) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.rows == nil {
		tb.rows = map[string]int64{}
	}
	tb.rows[id] = n
}

func (tb *table) source(_ context.Context, id string) ([]core.Limit, bool, error) {
	tb.calls.Add(1)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.err != nil {
		return nil, false, tb.err
	}
	n, ok := tb.rows[id]
	if !ok {
		return nil, false, nil
	}
	return []core.Limit{core.PerMinute(n)}, true, nil
}

// sourced is a Sourced over a fresh memstore: the default 5 per minute,
// on a frozen manual clock.
func sourced(t *testing.T, alg core.Algorithm, mode core.FailMode, src core.LimitSource, cfg core.SourceConfig, opts ...core.Option) (*core.Sourced, *core.ManualClock) {
	t.Helper()
	clk := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := core.Policy{Name: "api", Algorithm: alg, FailMode: mode, Limits: []core.Limit{core.PerMinute(5)}}
	if alg == core.SlidingWindowCounter {
		p.Buckets = 6
	}
	def, err := core.NewLimiter(mustMem(), p, append([]core.Option{core.WithClock(clk)}, opts...)...)
	require.NoError(t, err)
	s, err := core.NewSourced(def, src, cfg)
	require.NoError(t, err)
	return s, clk
}

// admitted sends n requests of identity id (key id) and counts the
// admitted ones.
func admitted(t *testing.T, s *core.Sourced, id string, n int) int {
	t.Helper()
	ctx := context.Background()
	got := 0
	for range n {
		d, _ := s.Select(ctx, id).Allow(ctx, id)
		if d.Allowed {
			got++
		}
	}
	return got
}

func TestSourceLimitsPerIdentity(t *testing.T) {
	tb := &table{}
	tb.set("alice", 2)
	tb.set("bob", 9)
	s, _ := sourced(t, core.GCRA, core.FailOpen, tb.source, patient)
	assert.Equal(t, 2, admitted(t, s, "alice", 20))
	assert.Equal(t, 9, admitted(t, s, "bob", 20))
	assert.Equal(t, 5, admitted(t, s, "carol", 20), "not found: the default's limits")
	assert.Equal(t, int64(3), tb.calls.Load(), "one lookup per identity, the rest from the cache")
	assert.Equal(t, 2, core.SourcedSets(s))
}

func TestSourceTTL(t *testing.T) {
	tb := &table{}
	tb.set("alice", 2)
	s, clk := sourced(t, core.GCRA, core.FailOpen, tb.source, core.SourceConfig{TTL: 10 * time.Second})
	ctx := context.Background()
	l2 := s.Select(ctx, "alice")
	assert.Equal(t, int64(2), l2.Policy().Limits[0].Requests)
	tb.set("alice", 7) // an admin raises the limit in the database
	clk.Advance(10*time.Second - time.Nanosecond)
	assert.Same(t, l2, s.Select(ctx, "alice"), "within the TTL the cached answer holds")
	assert.Equal(t, int64(1), tb.calls.Load())
	clk.Advance(time.Nanosecond)
	assert.Equal(t, int64(7), s.Select(ctx, "alice").Policy().Limits[0].Requests, "at the TTL the source is asked again")
	assert.Equal(t, int64(2), tb.calls.Load())
}

func TestSourceInvalidate(t *testing.T) {
	tb := &table{}
	tb.set("alice", 2)
	tb.set("bob", 3)
	s, _ := sourced(t, core.GCRA, core.FailOpen, tb.source, patient)
	ctx := context.Background()
	assert.Equal(t, int64(2), s.Select(ctx, "alice").Policy().Limits[0].Requests)
	assert.Equal(t, int64(3), s.Select(ctx, "bob").Policy().Limits[0].Requests)
	tb.set("alice", 8)
	tb.set("bob", 9)
	s.Invalidate("alice")
	assert.Equal(t, int64(8), s.Select(ctx, "alice").Policy().Limits[0].Requests, "Invalidate applies at once")
	assert.Equal(t, int64(3), s.Select(ctx, "bob").Policy().Limits[0].Requests, "other identities keep their answer")
	calls := tb.calls.Load()
	s.InvalidateAll()
	assert.Equal(t, int64(9), s.Select(ctx, "bob").Policy().Limits[0].Requests)
	assert.Equal(t, int64(8), s.Select(ctx, "alice").Policy().Limits[0].Requests)
	assert.Equal(t, calls+2, tb.calls.Load(), "InvalidateAll: every identity is asked again")
}

func TestSourceNotFoundIsCached(t *testing.T) {
	tb := &table{}
	s, clk := sourced(t, core.GCRA, core.FailOpen, tb.source, core.SourceConfig{TTL: time.Minute})
	ctx := context.Background()
	for range 100 {
		assert.Equal(t, "api", s.Select(ctx, "mallory").Policy().Name)
	}
	assert.Equal(t, int64(1), tb.calls.Load(), "not found is cached: an unknown identity costs one lookup per TTL")
	clk.Advance(time.Minute)
	s.Select(ctx, "mallory")
	assert.Equal(t, int64(2), tb.calls.Load())
}

func TestSourceErrorFallsBackToOwnLimits(t *testing.T) {
	tb := &table{err: errors.New("db down")}
	var fallbacks, lookupErrs atomic.Int64
	obs := core.ObserverFunc(func(e core.Event) {
		switch e.Source {
		case "fallback":
			fallbacks.Add(1)
		case "lookup":
			if e.Err != nil {
				lookupErrs.Add(1)
			}
		}
	})
	s, clk := sourced(t, core.GCRA, core.FailClosed, tb.source, patient, core.WithObserver(obs))
	ctx := context.Background()
	d, err := s.Select(ctx, "alice").Allow(ctx, "alice")
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.False(t, d.Degraded, "the default: the rule's own limits decide")
	assert.Equal(t, "api", d.Policy)
	assert.Equal(t, 4, admitted(t, s, "alice", 10), "the default's 5 per minute")
	assert.Equal(t, int64(11), fallbacks.Load(), "every request decided by the fallback")
	assert.Equal(t, int64(1), lookupErrs.Load())
	assert.Equal(t, int64(1), tb.calls.Load(), "a failure is cached (for at most a second)")
	clk.Advance(time.Second)
	tb.mu.Lock()
	tb.err = nil
	tb.mu.Unlock()
	tb.set("alice", 20)
	assert.Equal(t, int64(20), s.Select(ctx, "alice").Policy().Limits[0].Requests, "asked again a second later")
}

func TestSourceErrorFallsBackToFailMode(t *testing.T) {
	for _, mode := range []core.FailMode{core.FailClosed, core.FailOpen} {
		t.Run(mode.String(), func(t *testing.T) {
			tb := &table{err: errors.New("db down")}
			s, _ := sourced(t, core.GCRA, mode, tb.source, core.SourceConfig{FailModeOnError: true}, core.WithLogger(nil))
			ctx := context.Background()
			for range 10 {
				d, err := s.Select(ctx, "alice").Allow(ctx, "alice")
				require.Error(t, err)
				assert.True(t, d.Degraded)
				assert.Equal(t, mode == core.FailOpen, d.Allowed)
				assert.Equal(t, "api", d.Policy)
			}
		})
	}
}

// blocking is a source that never answers until release is closed, and
// ignores its context: the worst a source can do.
type blocking struct {
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int64
	once    sync.Once
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blocking) source(_ context.Context, _ string) ([]core.Limit, bool, error) {
	b.calls.Add(1)
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return []core.Limit{core.PerMinute(50)}, true, nil
}

func TestSourceSlowHonoursRequestDeadline(t *testing.T) {
	b := newBlocking()
	defer close(b.release)
	var fallbacks atomic.Int64
	obs := core.ObserverFunc(func(e core.Event) {
		if e.Kind == core.EventSource && e.Source == "fallback" && errors.Is(e.Err, context.Canceled) {
			fallbacks.Add(1)
		}
	})
	s, _ := sourced(t, core.GCRA, core.FailOpen, b.source, core.SourceConfig{Timeout: time.Hour}, core.WithObserver(obs))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-b.entered; cancel() }()
	l := s.Select(ctx, "alice") // returns when ctx ends, though the source never does
	assert.Equal(t, "api", l.Policy().Name, "the fallback: the default's limits")
	assert.Equal(t, int64(1), fallbacks.Load())
}

func TestSourceSlowHonoursLookupTimeout(t *testing.T) {
	b := newBlocking()
	defer close(b.release)
	var timeouts atomic.Int64
	obs := core.ObserverFunc(func(e core.Event) {
		if e.Kind == core.EventSource && e.Source == "fallback" && errors.Is(e.Err, context.DeadlineExceeded) {
			timeouts.Add(1)
		}
	})
	s, _ := sourced(t, core.GCRA, core.FailOpen, b.source, core.SourceConfig{Timeout: time.Millisecond}, core.WithObserver(obs))
	l := s.Select(context.Background(), "alice")
	assert.Equal(t, "api", l.Policy().Name)
	assert.Equal(t, int64(1), timeouts.Load())
}

func TestSourceCoalescesConcurrentMisses(t *testing.T) {
	b := newBlocking()
	s, _ := sourced(t, core.GCRA, core.FailOpen, b.source, core.SourceConfig{Timeout: time.Hour})
	const n = 50
	var wg sync.WaitGroup
	got := make([]int64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.Select(context.Background(), "alice").Policy().Limits[0].Requests
		}()
	}
	for core.SourcedWaiting(s) < n {
		runtime.Gosched()
	}
	close(b.release)
	wg.Wait()
	assert.Equal(t, int64(1), b.calls.Load(), "n concurrent misses of one identity: one lookup")
	for _, g := range got {
		assert.Equal(t, int64(50), g)
	}
}

func TestSourceBoundedUnderManyIdentities(t *testing.T) {
	tb := &table{}
	tb.set("id-7", 3)
	s, _ := sourced(t, core.GCRA, core.FailOpen, tb.source, core.SourceConfig{MaxEntries: 1000})
	ctx := context.Background()
	for i := range 100_000 {
		s.Select(ctx, fmt.Sprintf("id-%d", i))
	}
	assert.LessOrEqual(t, core.SourcedLen(s), 1000, "the cache holds at most MaxEntries")
	assert.Equal(t, int64(100_000), tb.calls.Load(), "each identity asked once")
	assert.LessOrEqual(t, core.SourcedSets(s), 1)
}

// TestSourceMemoryPerEntry measures the heap one cached identity costs
// (the figure SourceConfig.MaxEntries documents): 100,000 identities of
// 16 bytes, found, under one limit set.
func TestSourceMemoryPerEntry(t *testing.T) {
	const n = 100_000
	src := func(context.Context, string) ([]core.Limit, bool, error) {
		return []core.Limit{core.PerMinute(10)}, true, nil
	}
	s, _ := sourced(t, core.GCRA, core.FailOpen, src, core.SourceConfig{MaxEntries: 2 * n})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%011d", i)
	}
	ctx := context.Background()
	s.Select(ctx, ids[0])
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, id := range ids[1:] {
		s.Select(ctx, id)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.Equal(t, n, core.SourcedLen(s))
	per := float64(after.HeapAlloc-before.HeapAlloc) / (n - 1)
	t.Logf("%.0f bytes per cached identity (16-byte identities)", per)
	assert.Less(t, per, 400.0)
	runtime.KeepAlive(ids)
}

func TestSourceRaceOneKeyExact(t *testing.T) {
	tb := &table{}
	tb.set("alice", 37)
	s, _ := sourced(t, core.GCRA, core.FailOpen, tb.source, patient)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for range 20 {
				if d, _ := s.Select(ctx, "alice").Allow(ctx, "alice"); d.Allowed {
					ok.Add(1)
				}
				if d, _ := s.Select(ctx, "anon").Allow(ctx, "anon"); d.Allowed {
					ok.Add(1000)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(37+5*1000), ok.Load())
}

// TestSourceLimitChangePerAlgorithm: an identity's limit goes from 10 to
// 20 per minute and back, within one minute, on every algorithm. Each
// limit set is a policy of its own, so 20 starts full, and the way back
// to 10 finds the key's state under 10 as it was left (docs/limit-sources.md).
func TestSourceLimitChangePerAlgorithm(t *testing.T) {
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			tb := &table{}
			tb.set("alice", 10)
			s, clk := sourced(t, alg, core.FailOpen, tb.source, patient)
			clk.Advance(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC).Sub(clk.Now())) // inside a fixed window
			assert.Equal(t, 10, admitted(t, s, "alice", 30), "at 10 per minute")
			tb.set("alice", 20)
			s.Invalidate("alice")
			assert.Equal(t, 20, admitted(t, s, "alice", 30), "at 20: a fresh quota")
			tb.set("alice", 10)
			s.Invalidate("alice")
			assert.Equal(t, 0, admitted(t, s, "alice", 30), "back at 10: the state under 10 is kept, spent")
			clk.Advance(time.Minute + 10*time.Second)
			assert.Equal(t, 10, admitted(t, s, "alice", 30), "a window and a bucket later: 10 again")
		})
	}
}

func TestNewSourcedErrors(t *testing.T) {
	def := core.MustNewLimiter(mustMem(), core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(5)}})
	src := (&table{}).source
	for name, f := range map[string]func() (*core.Sourced, error){
		"nil def":     func() (*core.Sourced, error) { return core.NewSourced(nil, src, core.SourceConfig{}) },
		"nil source":  func() (*core.Sourced, error) { return core.NewSourced(def, nil, core.SourceConfig{}) },
		"negative":    func() (*core.Sourced, error) { return core.NewSourced(def, src, core.SourceConfig{TTL: -1}) },
		"neg entries": func() (*core.Sourced, error) { return core.NewSourced(def, src, core.SourceConfig{MaxEntries: -1}) },
	} {
		_, err := f()
		assert.Error(t, err, name)
	}
}

func TestSourceBadLimitsFallBack(t *testing.T) {
	src := func(_ context.Context, id string) ([]core.Limit, bool, error) {
		switch id {
		case "zero":
			return []core.Limit{{Requests: 0, Window: time.Minute}}, true, nil
		case "none":
			return nil, true, nil
		case "panic":
			panic("bug")
		}
		return make([]core.Limit, 9), true, nil
	}
	s, _ := sourced(t, core.GCRA, core.FailOpen, src, patient)
	for _, id := range []string{"zero", "none", "many", "panic"} {
		assert.Equal(t, "api", s.Select(context.Background(), id).Policy().Name, id)
	}
}
