package adaptertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storekit"
)

// T0 is the suite's start time: a whole second, so epoch resets are exact.
var T0 = time.Unix(1_700_000_000, 0)

// Env is one scenario's world: a manual clock and a memstore wrapped to
// record every key it is asked for.
type Env struct {
	Clock *core.ManualClock
	Store *RecStore
}

// NewEnv returns a fresh Env; the store is closed when t ends.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	clk := core.NewManualClock(T0)
	ms, err := memstore.New(memstore.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ms.Close() })
	return &Env{Clock: clk, Store: &RecStore{inner: ms}}
}

// Limiter builds a limiter for p on the env's store and clock.
func (e *Env) Limiter(t testing.TB, p core.Policy) *core.Limiter {
	t.Helper()
	l, err := core.NewLimiter(e.Store, p, core.WithClock(e.Clock))
	require.NoError(t, err)
	return l
}

// RecStore is a core.Store that records "policy#key" for every Take and
// either forwards to the memstore or, when Fail is set, fails.
type RecStore struct {
	inner core.Store
	mu    sync.Mutex
	keys  []string
	fail  error
}

var _ storekit.LocalStore = (*RecStore)(nil)

// Local reports true, as the memstore does.
func (s *RecStore) Local() bool { return true }

// SetFail makes every later Take fail with err (nil restores).
func (s *RecStore) SetFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Take implements core.Store.
func (s *RecStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, p.Name+"#"+key)
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return core.Decision{}, fail
	}
	return s.inner.Take(ctx, key, p, now, cost)
}

// Keys returns and forgets the keys recorded so far.
func (s *RecStore) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	s.keys = nil
	return k
}
