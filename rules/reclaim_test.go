package rules

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

// reloads is the count of TestReloadsReclaimState: the 10,000
// on the embedded store without the race detector, 1,500 (the review's
// probe) on Redis; fewer with -race or -short (a reload,
// with its file write and read, takes about a millisecond; several under
// -race).
func reloads(redis bool) int {
	switch {
	case redis && (raceEnabled || testing.Short()):
		return 300
	case redis:
		return 1_500
	case raceEnabled || testing.Short():
		return 1_500
	}
	return 10_000
}

// TestReloadsReclaimState (issue 22, item 4): reloads that change an
// elastic rule's capacity, or that use a new rule name each time, leave
// the store's policy count, its registrations and the heap flat, never
// fail, and the elastic rule stays elastic (memstore used to hit its
// 1,024-policy cap at reload 1,022 and turn the rule hard).
func TestReloadsReclaimState(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule func(i int) string
	}{
		{"capacity", func(i int) string {
			return fmt.Sprintf("rules:\n  - name: api\n    route: /api\n    limits: [\"2 per 1m\"]\n    algorithm: fixed_window\n    elastic: {ceiling: 200%%, capacity: \"%d per 1m\"}\n", 100+i)
		}},
		{"name", func(i int) string {
			return fmt.Sprintf("rules:\n  - name: api%d\n    route: /api\n    limits: [\"2 per 1m\"]\n    algorithm: fixed_window\n    elastic: {ceiling: 200%%, capacity: \"100 per 1m\"}\n", i)
		}},
	} {
		for _, onRedis := range []bool{false, true} {
			name := tc.name
			if onRedis {
				name += "/redis"
			}
			t.Run(name, func(t *testing.T) { reloadMany(t, tc.rule, onRedis) })
		}
	}
}

// reloadMany is TestReloadsReclaimState on one store.
func reloadMany(t *testing.T, rule func(i int) string, onRedis bool) {
	mem := memstore.MustNew()
	defer mem.Close()
	var store interface {
		core.Store
		Registered() int
	} = mem
	if onRedis {
		rs, err := redisstore.New(redistest.StartNode(t).NewClient(t), redisstore.WithClientTime())
		require.NoError(t, err)
		store = rs
	}
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	opts := []core.Option{core.WithClock(clock), core.WithTimeout(redistest.StoreTimeout)}
	sig := NewSignals(SignalEnv{Store: store, Options: opts})
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(i int) {
		require.NoError(t, os.WriteFile(path+".tmp", []byte(rule(i)), 0o600))
		require.NoError(t, os.Rename(path+".tmp", path))
	}
	write(0)
	set, err := LoadFile(path)
	require.NoError(t, err)
	set, err = set.WithSignals(sig)
	require.NoError(t, err)
	live, err := NewLive[struct{}](store, set, nil, opts...)
	require.NoError(t, err)
	ctx := context.Background()
	// decide one request per reload through the current rule, and
	// at the end exhaust it for a new key: its third request is
	// elastic
	decide := func(key string, n int) core.Decision {
		snap := live.Acquire()
		defer snap.Release()
		r := snap.Set().Match("GET", "/api", false)
		require.NotNil(t, r)
		var d core.Decision
		for k := 0; k < n; k++ {
			d, err = snap.Limiter(r).Allow(ctx, key)
			require.NoError(t, err)
		}
		return d
	}
	n := reloads(onRedis)
	var base runtime.MemStats
	for i := 1; i <= n; i++ {
		write(i)
		_, err := live.ReloadFile(path)
		require.NoError(t, err, "reload %d", i)
		decide(fmt.Sprint("client", i%100), 1)
		if i == n/10 {
			runtime.GC()
			runtime.ReadMemStats(&base)
		}
	}
	d := decide("last", 3)
	assert.True(t, d.Allowed && d.Elastic, "the rule is still elastic after %d reloads: %+v", n, d)
	st := mem.Stats()
	// the rule and its capacity limit
	assert.LessOrEqual(t, st.Policies, 2, "tables")
	assert.Equal(t, 2, store.Registered(), "registered names")
	assert.LessOrEqual(t, len(sig.caps), 1, "capacity limits")
	var end runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&end)
	grow := int64(end.HeapAlloc) - int64(base.HeapAlloc)
	t.Logf("%d reloads: heap %.1f MB at reload %d, %.1f MB at the end; %d tables", n, float64(base.HeapAlloc)/1e6, n/10, float64(end.HeapAlloc)/1e6, st.Policies)
	assert.Less(t, grow, int64(4<<20), "the heap grows with reloads")
}

// TestSwapKeepsCapacityBuiltBeforeADrain: a set built with WithSignals
// and swapped in after an older snapshot drained keeps its capacity
// limit (the drain must not release what is on its way to Swap), and the
// capacity limits no set uses go.
func TestSwapKeepsCapacityBuiltBeforeADrain(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	sig := NewSignals(SignalEnv{Store: store})
	withCap := func(n int) *Set {
		set := mustParse(t, fmt.Sprintf("rules:\n  - name: api\n    route: /api\n    limits: [\"2 per 1m\"]\n    algorithm: fixed_window\n    elastic: {ceiling: 200%%, capacity: \"%d per 1m\"}\n", n))
		set, err := set.WithSignals(sig)
		require.NoError(t, err)
		return set
	}
	live, err := NewLive[struct{}](store, withCap(100), nil)
	require.NoError(t, err)
	held := live.Acquire()
	_, err = live.Swap(withCap(101))
	require.NoError(t, err)
	next := withCap(102) // as a reload does: signals first, then Swap
	held.Release()       // the old snapshot drains in between
	_, err = live.Swap(next)
	require.NoError(t, err)
	assert.Equal(t, []string{capacityName("api", core.PerMinute(102))}, keys(sig.caps))
	assert.Equal(t, 2, store.Registered(), "the rule and its capacity limit")

	snap := live.Acquire()
	defer snap.Release()
	var d core.Decision
	for range 3 {
		d, err = snap.Limiter(snap.Set().Match("GET", "/api", false)).Allow(context.Background(), "k")
		require.NoError(t, err)
	}
	assert.True(t, d.Elastic, "still elastic")
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
