package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// partnerPolicy is docs/recipes.md's outbound worker policy.
func partnerPolicy() core.Policy {
	return core.Policy{
		Name:     "partner-api",
		Limits:   []core.Limit{{Requests: 20, Window: time.Second, Burst: 1}},
		FailMode: core.FailClosed,
	}
}

// TestOutboundRecipe (issue 37): the outbound worker recipe (docs/
// recipes.md) sends at most 20 requests in any second — evenly spaced,
// 50 ms apart, where a burst of 20 would let 39 through in one second's
// span — and, failing closed, sends nothing while its store fails (the
// default fail-open turned Wait into "send now": 587 sent against 501).
func TestOutboundRecipe(t *testing.T) {
	ctx := context.Background()
	t.Run("20 in any second", func(t *testing.T) {
		s := mustMem()
		defer s.Close()
		clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
		defer core.SetSleep(func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil })()
		partner := core.MustNewLimiter(s, partnerPolicy(), core.WithClock(clock))
		var sent []time.Time
		for range 200 {
			require.NoError(t, partner.Wait(ctx, "partner"))
			sent = append(sent, clock.Now())
		}
		most := 0
		for i := range sent {
			n := 0
			for _, x := range sent[i:] {
				if x.Sub(sent[i]) < time.Second {
					n++
				}
			}
			most = max(most, n)
		}
		assert.Equal(t, 20, most, "most requests sent in a second's span")
		assert.Equal(t, 199*50*time.Millisecond, sent[199].Sub(sent[0]), "200 requests, 50 ms apart")
	})
	t.Run("fails closed", func(t *testing.T) {
		down := failingStore{err: errors.New("i/o timeout")}
		for mode, wantSent := range map[core.FailMode]int{core.FailClosed: 0, core.FailOpen: 50} {
			p := partnerPolicy()
			p.FailMode = mode
			partner := core.MustNewLimiter(down, p, core.WithLogger(nil))
			sent := 0
			for range 50 {
				if partner.Wait(ctx, "partner") == nil {
					sent++
				}
			}
			assert.Equal(t, wantSent, sent, "%s: jobs sent while the store fails", mode)
		}
	})
}
