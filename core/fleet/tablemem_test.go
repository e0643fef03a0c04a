package fleet

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// stateless is a remote store that keeps nothing: it admits with a large
// remaining, or, when deny, denies for a minute, so that a measurement
// of the heap counts the tier alone.
type stateless struct{ deny bool }

func (r stateless) Take(_ context.Context, _ string, p *core.Policy, _ time.Time, cost int64) (core.Decision, error) {
	if r.deny && cost > 0 {
		return core.Decision{Allowed: false, Limit: p.Limits[0], RetryAfter: time.Minute, ResetAfter: time.Minute, Policy: p.Name}, nil
	}
	return core.Decision{Allowed: true, Limit: p.Limits[0], Remaining: 1 << 20, ResetAfter: time.Minute, Policy: p.Name}, nil
}

func (r stateless) TakeBatch(ctx context.Context, b []storekit.BatchTake) error {
	for i := range b {
		b[i].Decision, b[i].Err = r.Take(ctx, b[i].Key, b[i].Policy, b[i].Now, b[i].Cost)
	}
	return nil
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// tableHeap floods a default tier with n distinct keys of keyLen bytes
// (two requests each) and returns the heap the tier holds afterwards
// (its keys included), the keys' own bytes, and the entries held.
func tableHeap(t testing.TB, n, keyLen int, deny bool) (heap, keyBytes uint64, entries int) {
	base := heapInUse()
	tier, err := newFleet(stateless{deny: deny}, WithSync(time.Second), withoutSyncLoop())
	require.NoError(t, err)
	defer tier.Close()
	mode := core.ModeWriteBack
	if deny {
		mode = core.ModeExact
	}
	p := &core.Policy{Name: "flood", Mode: mode, Limits: []core.Limit{core.PerMinute(1 << 20)}}
	ctx := context.Background()
	pad := strings.Repeat("x", max(0, keyLen-10))
	for i := range n {
		k := fmt.Sprintf("%s%010d", pad, i)
		for range 2 {
			_, _ = tier.Take(ctx, k, p, time.Unix(1_900_000_000, 0), 1)
		}
	}
	for i := range tier.shards {
		entries += len(tier.shards[i].m)
	}
	heap = heapInUse() - base
	runtime.KeepAlive(tier)
	return heap, uint64(entries * keyLen), entries
}

// TestTableHeapBound: a flood of distinct keys (100,000, more than the
// default table holds) leaves a default tier holding at most the heap
// WithMaxKeys documents: 36 MB plus the keys, 70 MB with 512-byte keys.
// Write-back is measured (its entries hold more than the deny cache's).
func TestTableHeapBound(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes the heap's figures")
	}
	for _, c := range []struct {
		keyLen int
		bound  uint64 // bytes, the keys excluded when keyLen is short
	}{{16, 36_000_000}, {maxKeyLen, 70_000_000}} {
		heap, keys, entries := tableHeap(t, 100_000, c.keyLen, false)
		t.Logf("%d-byte keys: %d entries, heap %.1f MB (keys %.1f MB)", c.keyLen, entries, float64(heap)/1e6, float64(keys)/1e6)
		require.Equal(t, defaultMaxKeys, entries, "the table is full")
		if c.keyLen < maxKeyLen {
			heap -= min(heap, keys)
		}
		require.LessOrEqual(t, heap, c.bound, "%d-byte keys", c.keyLen)
	}
}
