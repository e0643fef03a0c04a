package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestOOMKindEveryPath: a Redis out of memory (maxmemory + noeviction)
// answers the tier's remote calls with OOM replies; every path reports
// them as "oom" (the metrics' kind="oom"), not "other": the
// write-back sync's batch (its EventSync and Sync's error, where every
// entry failed) and the exact path's decision.
func TestOOMKindEveryPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := redistest.StartNode(t, "--maxmemory-policy", "noeviction")
	clk := core.NewManualClock(t0)
	ev := &events{}
	wb := newTier(t, redisStore(t, srv.NewClient(t)), WithClock(clk), WithSync(time.Second), WithMaxLease(4),
		withoutSyncLoop(), WithObserver(ev))
	exact := newTier(t, redisStore(t, srv.NewClient(t)), WithClock(clk), WithDenyCacheTTL(0))
	p := &core.Policy{Name: "oomsync", Limits: []core.Limit{core.PerSecond(10_000)}}
	pe := &core.Policy{Name: "oomexact", Limits: []core.Limit{core.PerSecond(10_000)}}
	// hot keys, loaded and leased while Redis has memory
	for k := 0; k < 20; k++ {
		for j := 0; j < 3; j++ {
			_, err := wb.Take(ctx, fmt.Sprint("k", k), p, clk.Now(), 1)
			require.NoError(t, err)
		}
	}
	_, err := srv.Do("CONFIG", "SET", "maxmemory", "1")
	require.NoError(t, err)
	for k := 0; k < 20; k++ {
		for j := 0; j < 8; j++ { // past the lease: the next sync forwards or renews
			_, _ = wb.Take(ctx, fmt.Sprint("k", k), p, clk.Now(), 1)
		}
	}
	clk.Advance(time.Second)
	err = wb.Sync(ctx)
	require.Error(t, err, "every entry of the sync failed")
	assert.Equal(t, "oom", core.ClassifyError(err), "Sync: %v", err)
	syncs := ev.kinds(core.EventSync)
	require.NotEmpty(t, syncs)
	last := syncs[len(syncs)-1]
	require.Error(t, last.Err)
	assert.Equal(t, "oom", core.ClassifyError(last.Err), "EventSync: %v", last.Err)
	assert.Equal(t, "oom", core.ClassifyError(last.Err), "the metrics' kind label")

	_, err = exact.Take(ctx, "fresh", pe, clk.Now(), 1)
	require.Error(t, err)
	assert.Equal(t, "oom", core.ClassifyError(err), "exact Take: %v", err)
}
