package memstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storekit"
)

// TestSlotStoreRenewAndSweep: AcquireSlot with a held token renews it past
// the key's Max; keys whose holders left are swept.
func TestSlotStoreRenewAndSweep(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	s := ms.(storekit.SlotStore)
	p := &core.ConcurrencyPolicy{Name: "s", Max: 1, Lease: time.Second}
	ctx := context.Background()
	n, ok, err := s.AcquireSlot(ctx, "k", p, 7, t0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(1), n)
	_, ok, _ = s.AcquireSlot(ctx, "k", p, 8, t0)
	require.False(t, ok)
	n, ok, _ = s.AcquireSlot(ctx, "k", p, 7, t0.Add(900*time.Millisecond))
	require.True(t, ok, "a renewal is refused at Max")
	require.Equal(t, int64(1), n)
	_, ok, _ = s.AcquireSlot(ctx, "k", p, 8, t0.Add(1500*time.Millisecond))
	require.False(t, ok, "the renewal did not move the expiry")
	_, ok, _ = s.AcquireSlot(ctx, "k", p, 8, t0.Add(1900*time.Millisecond))
	require.True(t, ok)
	require.NoError(t, s.ReleaseSlot(ctx, "k", p, 8))
	require.NoError(t, s.ReleaseSlot(ctx, "k", p, 8))
	for i := 0; i < 5000; i++ {
		k := strconv.Itoa(i)
		_, ok, _ := s.AcquireSlot(ctx, k, p, 1, t0)
		require.True(t, ok)
		require.NoError(t, s.ReleaseSlot(ctx, k, p, 1))
	}
	require.NoError(t, ms.Close())
	_, _, err = s.AcquireSlot(ctx, "k", p, 9, t0)
	require.ErrorIs(t, err, core.ErrClosed)
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkConcurrencyAcquireRelease is one in-flight slot acquired and
// released on the embedded store, beside one GCRA decision (the bar: at
// most 2x), serial and parallel.
func BenchmarkConcurrencyAcquireRelease(b *testing.B) {
	s := memstore.MustNew()
	defer s.Close()
	ctx := context.Background()
	gcra := core.MustNewLimiter(s, core.Policy{Name: "bench_gcra", Limits: []core.Limit{core.Per(1<<30, 30*24*time.Hour)}})
	conc, err := core.NewConcurrency(s, core.ConcurrencyPolicy{Name: "bench_conc", Max: 1 << 30})
	require.NoError(b, err)
	b.Run("gcra", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = gcra.Allow(ctx, "user-1")
		}
	})
	b.Run("acquire_release", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			rel, _, _ := conc.Acquire(ctx, "user-1")
			rel.Release()
		}
	})
	var next atomic.Int64
	b.Run("gcra_parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			k := "user-" + strconv.FormatInt(next.Add(1), 10)
			for pb.Next() {
				_, _ = gcra.Allow(ctx, k)
			}
		})
	})
	b.Run("acquire_release_parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			k := "user-" + strconv.FormatInt(next.Add(1), 10)
			for pb.Next() {
				rel, _, _ := conc.Acquire(ctx, k)
				rel.Release()
			}
		})
	})
}
