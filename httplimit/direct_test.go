package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/keyfuncs"
)

// hiddenStore is a memstore that is not a core.DirectStore, so that its
// decisions go through the Limiter: the reference for the engine's direct
// calls of TakeTo.
type hiddenStore struct{ *memstore.Store }

// TakeTo shadows the memstore's with another signature.
func (hiddenStore) TakeTo() {}

// directPair builds two engines on two fresh memstores with the same
// policy and clock: one that calls its store directly, one that decides
// through the Limiter.
// Both get opts, then their own option.
func directPair(t *testing.T, p core.Policy, clk core.Clock, opts []Option, own [2]Option) (direct, viaLimiter *Engine, stores [2]*memstore.Store) {
	t.Helper()
	quiet := core.WithLogger(slog.New(slog.DiscardHandler))
	for i := range stores {
		stores[i] = memstore.MustNew()
		st := stores[i]
		t.Cleanup(func() { _ = st.Close() })
	}
	ld, err := core.NewLimiter(stores[0], p, core.WithClock(clk), quiet)
	require.NoError(t, err)
	lh, err := core.NewLimiter(hiddenStore{stores[1]}, p, core.WithClock(clk), quiet)
	require.NoError(t, err)
	direct, err = NewEngine("x", ld, append(opts[:len(opts):len(opts)], own[0])...)
	require.NoError(t, err)
	viaLimiter, err = NewEngine("x", lh, append(opts[:len(opts):len(opts)], own[1])...)
	require.NoError(t, err)
	require.NotNil(t, direct.checks[0].direct, "the engine on a memstore must call it directly")
	require.Nil(t, viaLimiter.checks[0].lim.DirectStore())
	require.Nil(t, viaLimiter.checks[0].direct)
	return direct, viaLimiter, stores
}

// TestDirectTakeMatchesLimiter: an engine that calls the memstore's
// TakeTo itself decides exactly as one that asks the Limiter, over every
// algorithm, two limits, costs above one, denials and a moving clock:
// the same Results and the same header fields.
func TestDirectTakeMatchesLimiter(t *testing.T) {
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			clk := core.NewManualClock(time.Unix(1_700_000_000, 123_456_789))
			p := core.Policy{Name: "p", Algorithm: alg, Limits: []core.Limit{core.PerSecond(5), core.PerMinute(40)}}
			rng := rand.New(rand.NewSource(int64(alg) + 1))
			cost := func(keyfuncs.Request) int64 { return int64(1 + rng.Intn(3)) }
			var costs []int64
			recorded := func(r keyfuncs.Request) int64 { c := cost(r); costs = append(costs, c); return c }
			replay := func(keyfuncs.Request) int64 { c := costs[0]; costs = costs[1:]; return c }
			direct, viaLimiter, _ := directPair(t, p, clk, nil, [2]Option{WithCost(recorded), WithCost(replay)})
			peers := []string{"203.0.113.7:1", "198.51.100.2:9", "[2001:db8::1]:443"}
			denied := 0
			for i := 0; i < 600; i++ {
				req := httpReq("GET", "GET /a", peers[rng.Intn(len(peers))])
				var a, b Result
				direct.DecideInto(context.Background(), req, &a)
				viaLimiter.DecideInto(context.Background(), req, &b)
				require.Equal(t, b, a, "request %d", i)
				var fa, fb Fields
				direct.Fields(&a, &fa)
				viaLimiter.Fields(&b, &fb)
				require.Equal(t, fb, fa, "request %d", i)
				if a.Action == Deny {
					denied++
				}
				clk.Advance(time.Duration(rng.Intn(400)) * time.Millisecond)
			}
			assert.Greater(t, denied, 50, "the sequence must reach the limits")
		})
	}
}

// TestDirectTakeClosedStore: when the store fails (closed), the direct
// engine decides as the Limiter does: the policy's fail mode, the error
// reported to the hook.
func TestDirectTakeClosedStore(t *testing.T) {
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
			var errs [2][]error
			hook := func(i int) Option {
				return WithErrorHook(func(_ context.Context, err error) { errs[i] = append(errs[i], err) })
			}
			p := core.Policy{Name: "p", FailMode: mode, Limits: []core.Limit{core.PerMinute(10)}}
			direct, viaLimiter, stores := directPair(t, p, clk, nil, [2]Option{hook(0), hook(1)})
			req := httpReq("GET", "GET /a", "203.0.113.7:1")
			for _, st := range stores {
				require.NoError(t, st.Close())
			}
			var a, b Result
			direct.DecideInto(context.Background(), req, &a)
			viaLimiter.DecideInto(context.Background(), req, &b)
			assert.Equal(t, b, a)
			assert.True(t, a.Decision.Degraded)
			assert.Equal(t, mode == core.FailOpen, a.Action == Pass)
			require.Len(t, errs[0], 1)
			require.Len(t, errs[1], 1)
			assert.ErrorIs(t, errs[0][0], core.ErrClosed)
			assert.Equal(t, errs[1][0].Error(), errs[0][0].Error())
		})
	}
}

// outsideStore is a core.DirectStore that is not one of the module's
// stores: one map under one mutex, deciding with core's math. It counts
// its calls of Take and TakeTo, and fails every call while failing is set.
type outsideStore struct {
	mu      sync.Mutex
	states  map[string][]int64
	takes   int
	takeTos int
	failing bool
}

var errOutside = errors.New("outside store down")

func (s *outsideStore) Local() bool { return true }

func (s *outsideStore) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (d core.Decision, err error) {
	s.mu.Lock()
	s.takes++
	s.mu.Unlock()
	err = s.decide(key, p, now, cost, &d)
	return d, err
}

func (s *outsideStore) TakeTo(key string, p *core.Policy, now time.Time, cost int64, d *core.Decision) error {
	s.mu.Lock()
	s.takeTos++
	s.mu.Unlock()
	return s.decide(key, p, now, cost, d)
}

func (s *outsideStore) decide(key string, p *core.Policy, now time.Time, cost int64, d *core.Decision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		*d = core.Decision{}
		return errOutside
	}
	c, err := p.Compile()
	if err != nil {
		return err
	}
	st, ok := s.states[key]
	if !ok {
		st = make([]int64, c.StateWords())
		s.states[key] = st
	}
	c.DecideTo(d, st, now.UnixMicro(), cost)
	return nil
}

// localOnly is a store with only Take and Local: not a core.DirectStore.
type localOnly struct{ core.LocalStore }

// TestDirectTakeOutsideStore: a store written outside the module that
// implements core.DirectStore gets the engine's direct path (every
// decision one TakeTo, no Take), decides as the same store through the
// Limiter, and on a failing TakeTo the engine decides through the
// Limiter (its fail mode, the error to the hook).
func TestDirectTakeOutsideStore(t *testing.T) {
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	p := core.Policy{Name: "p", FailMode: core.FailOpen, Limits: []core.Limit{core.PerSecond(3), core.PerMinute(20)}}
	quiet := core.WithLogger(slog.New(slog.DiscardHandler))
	stores := [2]*outsideStore{{states: map[string][]int64{}}, {states: map[string][]int64{}}}
	var errs []error
	ld := core.MustNewLimiter(stores[0], p, core.WithClock(clk), quiet)
	lh := core.MustNewLimiter(localOnly{stores[1]}, p, core.WithClock(clk), quiet)
	direct, err := NewEngine("x", ld, WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }))
	require.NoError(t, err)
	viaLimiter, err := NewEngine("x", lh)
	require.NoError(t, err)
	require.NotNil(t, direct.checks[0].direct)
	require.Nil(t, viaLimiter.checks[0].direct)
	const n = 60
	denied := 0
	for i := 0; i < n; i++ {
		req := httpReq("GET", "GET /a", "203.0.113.7:1")
		var a, b Result
		direct.DecideInto(context.Background(), req, &a)
		viaLimiter.DecideInto(context.Background(), req, &b)
		require.Equal(t, b, a, "request %d", i)
		if a.Action == Deny {
			denied++
		}
		clk.Advance(100 * time.Millisecond)
	}
	assert.Greater(t, denied, 10, "the sequence must reach the limits")
	assert.Equal(t, [2]int{0, n}, [2]int{stores[0].takes, stores[0].takeTos}, "the outside store's Take and TakeTo calls")
	assert.Equal(t, n, stores[1].takes)

	stores[0].failing = true
	var r Result
	direct.DecideInto(context.Background(), httpReq("GET", "GET /a", "203.0.113.7:1"), &r)
	assert.Equal(t, Pass, r.Action, "FailOpen")
	assert.True(t, r.Degraded)
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], errOutside)
	assert.Equal(t, [2]int{1, n + 1}, [2]int{stores[0].takes, stores[0].takeTos}, "a failed TakeTo is decided again through the Limiter")
}
