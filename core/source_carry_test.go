package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// keyed sends n requests of identity id through SelectKey (key id), as
// httplimit does, and counts the admitted ones.
func keyed(s *core.Sourced, id string, n int) int {
	ctx := context.Background()
	got := 0
	for range n {
		if d, _ := s.SelectKey(ctx, id, id).Allow(ctx, id); d.Allowed {
			got++
		}
	}
	return got
}

// TestSourceCarryPerAlgorithm: through SelectKey a key's use carries to
// its identity's new limits, on every algorithm: raised from 5 to 10
// after 5 used, exactly 5 more; cut from 10 to 5 after 3 used, exactly 2
// more; from the rule's own 5 (not found) to 10 of its own after 4 used,
// 6 more; and flapping between 10 and 20 never admits more than 20 in
// the window.
func TestSourceCarryPerAlgorithm(t *testing.T) {
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			tb := &table{}
			s, clk := sourced(t, alg, core.FailOpen, tb.source, patient)
			clk.Advance(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC).Sub(clk.Now())) // inside a fixed window
			change := func(id string, n int64) {
				tb.set(id, n)
				s.Invalidate(id)
			}

			tb.set("raise", 5)
			assert.Equal(t, 5, keyed(s, "raise", 5))
			change("raise", 10)
			assert.Equal(t, 5, keyed(s, "raise", 30), "raised 5 -> 10 after 5 used")

			tb.set("cut", 10)
			assert.Equal(t, 3, keyed(s, "cut", 3))
			change("cut", 5)
			assert.Equal(t, 2, keyed(s, "cut", 30), "cut 10 -> 5 after 3 used")

			assert.Equal(t, 4, keyed(s, "new", 4), "the rule's own 5")
			change("new", 10)
			assert.Equal(t, 6, keyed(s, "new", 30), "from the rule's 5 to 10 of its own after 4 used")

			total := 0
			for i := range 8 {
				change("flap", int64(10+10*(i%2)))
				total += keyed(s, "flap", 30)
			}
			assert.Equal(t, 20, total, "flapping between 10 and 20 in one window")

			clk.Advance(time.Minute + 10*time.Second)
			assert.Equal(t, 5, keyed(s, "cut", 30), "a window (and a bucket) later: full again")
		})
	}
}

// TestSourceCarryOnce: the carry runs once per change; Select (without a
// key) does not carry, and leaves the carry to the next SelectKey.
func TestSourceCarryOnce(t *testing.T) {
	tb := &table{}
	tb.set("a", 5)
	s, _ := sourced(t, core.FixedWindow, core.FailOpen, tb.source, patient)
	assert.Equal(t, 5, keyed(s, "a", 5))
	tb.set("a", 10)
	s.Invalidate("a")
	assert.Equal(t, int64(10), s.Select(context.Background(), "a").Policy().Limits[0].Requests)
	assert.Equal(t, 5, keyed(s, "a", 30), "the carry waited for SelectKey")
	s.Invalidate("a") // asked again, same limits: nothing more to carry
	assert.Equal(t, 0, keyed(s, "a", 30))

	// back to a limit set with use of its own: only the difference
	tb.set("b", 10)
	assert.Equal(t, 3, keyed(s, "b", 3))
	tb.set("b", 5)
	s.Invalidate("b")
	assert.Equal(t, 1, keyed(s, "b", 1)) // 3 carried, 4 used under 5
	tb.set("b", 10)
	s.Invalidate("b")
	assert.Equal(t, 6, keyed(s, "b", 30), "3 used under 10 already, 1 more carried")
}

// TestSourceCarrySeveralLimits: of several limits, the least difference
// is carried (one charge adds to every limit alike).
func TestSourceCarrySeveralLimits(t *testing.T) {
	clk := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	lim := int64(4)
	src := func(context.Context, string) ([]core.Limit, bool, error) {
		return []core.Limit{core.PerMinute(lim), core.PerHour(100)}, true, nil
	}
	def, err := core.NewLimiter(memstore.MustNew(), core.Policy{Name: "api", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(5)}}, core.WithClock(clk))
	require.NoError(t, err)
	s, err := core.NewSourced(def, src, patient)
	require.NoError(t, err)
	assert.Equal(t, 4, keyed(s, "a", 10))
	clk.Advance(time.Minute)
	assert.Equal(t, 4, keyed(s, "a", 10)) // 4 in this minute, 8 in the hour
	lim = 6
	s.Invalidate("a")
	assert.Equal(t, 2, keyed(s, "a", 10), "4 carried (the minute's use; the hour's 8 only in part)")
	u, err := s.SelectKey(context.Background(), "a", "a").Usage(context.Background(), "a")
	require.NoError(t, err)
	assert.Equal(t, int64(6), u.Limits[1].Used, "the hour counts the carried 4 and the 2 since")
}

// patient is a SourceConfig whose lookups never time out on a loaded
// host: the tests that use it count admissions, and a lookup that fell
// back after the default 100 ms would decide one request by the rule's
// own limits.
var patient = core.SourceConfig{Timeout: time.Hour}
