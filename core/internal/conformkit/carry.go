package conformkit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// SourceCarry runs the limit sources' carry scenario (issue 36) on store
// under alg: a change of an identity's limits carries its key's use to the
// new limits. Raised 5 -> 10 after 5 used admits 5 more; cut 10 -> 5 after
// 3 used admits 2; flapping between 10 and 20 admits 20 in the window.
// The remote stores' tests run it; core's TestSourceCarryPerAlgorithm is
// the embedded store's.
func SourceCarry(t *testing.T, store core.Store, alg core.Algorithm) {
	ctx := context.Background()
	clk := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	p := core.Policy{Name: "api", Algorithm: alg, Limits: []core.Limit{core.PerMinute(5)}}
	if alg == core.SlidingWindowCounter {
		p.Buckets = 6
	}
	def, err := core.NewLimiter(store, p, core.WithClock(clk))
	require.NoError(t, err)
	rows := map[string]int64{}
	s, err := core.NewSourced(def, func(_ context.Context, id string) ([]core.Limit, bool, error) {
		n, ok := rows[id] // read only while no request runs
		if !ok {
			return nil, false, nil
		}
		return []core.Limit{core.PerMinute(n)}, true, nil
	}, core.SourceConfig{Timeout: time.Hour}) // never a fallback on a loaded host
	require.NoError(t, err)
	send := func(id string, n int) (got int) {
		for range n {
			d, err := s.SelectKey(ctx, id, id).Allow(ctx, id)
			require.NoError(t, err)
			if d.Allowed {
				got++
			}
		}
		return got
	}
	change := func(id string, n int64) {
		rows[id] = n
		s.Invalidate(id)
	}
	rows["raise"] = 5
	assert.Equal(t, 5, send("raise", 5))
	change("raise", 10)
	assert.Equal(t, 5, send("raise", 30), "raised 5 -> 10 after 5 used")
	rows["cut"] = 10
	assert.Equal(t, 3, send("cut", 3))
	change("cut", 5)
	assert.Equal(t, 2, send("cut", 30), "cut 10 -> 5 after 3 used")
	total := 0
	for i := range 6 {
		change("flap", int64(10+10*(i%2)))
		total += send("flap", 30)
	}
	assert.Equal(t, 20, total, "flapping between 10 and 20 in one window")
}
