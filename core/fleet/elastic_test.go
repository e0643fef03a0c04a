package fleet

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/core/storetest"
	"github.com/limitkit/limitkit/internal/redistest"
)

type roomSignal struct{ on atomic.Bool }

func (s *roomSignal) Acquire(context.Context, int64) (bool, error) { return s.on.Load(), nil }

// TestElasticThroughTier: four tiers in write-back mode (the default for
// hard policies here) over one Redis pass an elastic policy through to the
// remote store, both takes: 1,000 goroutines over the four, one request
// each, on one key with a limit of 100 and a ceiling of 250% admit exactly
// 100 nominal and 150 elastic requests. Denials are not served from the
// deny cache: 36 s later (one emission interval) the ceiling has room
// again for one request, long before the nominal RetryAfter a cached
// denial would have waited for.
func TestElasticThroughTier(t *testing.T) {
	srv := redistest.StartNode(t)
	sig := &roomSignal{}
	sig.on.Store(true)
	p := core.Policy{Name: "el", Algorithm: core.GCRA, Limits: []core.Limit{core.PerHour(100)},
		Elastic: &core.Elastic{CeilingPercent: 250, Signal: sig}}
	clock := core.NewManualClock(time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC))
	var limiters []*core.Limiter
	for i := 0; i < 4; i++ {
		tier := newTier(t, redisStore(t, srv.NewClient(t)), WithDefaultMode(core.ModeWriteBack), WithClock(clock))
		l, err := core.NewLimiter(tier, p, core.WithClock(clock), core.WithTimeout(time.Minute))
		require.NoError(t, err)
		limiters = append(limiters, l)
	}
	var nominal, elastic, denied atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := limiters[i%4].Allow(context.Background(), "k")
			assert.NoError(t, err)
			switch {
			case d.Elastic:
				elastic.Add(1)
			case d.Allowed:
				nominal.Add(1)
			default:
				denied.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(100), nominal.Load())
	assert.Equal(t, int64(150), elastic.Load())
	assert.Equal(t, int64(750), denied.Load())

	for _, l := range limiters {
		d, err := l.Allow(context.Background(), "k")
		require.NoError(t, err)
		require.False(t, d.Allowed, "at the ceiling")
		// the exact hard decision: the nominal limit admits again once
		// the 250 units taken at once have refilled to 99 spent
		require.Equal(t, 90*time.Minute+36*time.Second, d.RetryAfter)
		require.Equal(t, 150*time.Minute, d.ResetAfter)
	}
	clock.Advance(36 * time.Second)
	for i, l := range limiters {
		d, err := l.Allow(context.Background(), "k")
		require.NoError(t, err)
		require.Equal(t, i == 0, d.Allowed && d.Elastic, "tier %d: one more elastic admission, the first", i)
	}
}

// TestElasticTierRemoteWithoutElastic: a remote store that cannot decide
// elastic policies makes the elastic take fail; the Limiter keeps the hard
// decision.
func TestElasticTierRemoteWithoutElastic(t *testing.T) {
	sig := &roomSignal{}
	sig.on.Store(true)
	p := core.Policy{Name: "el", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(1)},
		Elastic: &core.Elastic{CeilingPercent: 200, Signal: sig}}
	tier := newTier(t, pingFake{batchFake{newFake()}})
	_, err := tier.TakeElastic(context.Background(), "k", &p, time.Now(), 1)
	require.ErrorContains(t, err, "does not implement storekit.ElasticStore")
}

// TestElasticDrain (issue 22): two tiers (exact mode, the default) over
// one Redis share a capacity limit: one key's burst of 200 concurrent
// requests keeps only the capacity of its elastic admissions (the
// losers' is refunded, and the deny cache the exhausted capacity left is
// cleared); 20 other clients get the rest.
func TestElasticDrain(t *testing.T) {
	srv := redistest.StartNode(t)
	clock := core.NewManualClock(time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC))
	n := 0
	storetest.ElasticDrain(t, func(t *testing.T) []core.Store {
		n++
		pre := redisstore.WithPrefix("drain" + strconv.Itoa(n) + ":")
		return []core.Store{newTier(t, redisStore(t, srv.NewClient(t), pre), WithClock(clock)), newTier(t, redisStore(t, srv.NewClient(t), pre), WithClock(clock))}
	}, core.WithClock(clock), core.WithTimeout(time.Minute))
}

// TestRefundWriteBackRefused: a write-back policy cannot be refunded.
func TestRefundWriteBackRefused(t *testing.T) {
	srv := redistest.StartNode(t)
	tier := newTier(t, redisStore(t, srv.NewClient(t)), WithDefaultMode(core.ModeWriteBack))
	p := core.Policy{Name: "wb", Limits: []core.Limit{core.PerMinute(10)}}
	require.ErrorContains(t, tier.Refund(context.Background(), "k", &p, time.Now(), 1), "write-back")
}
