package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// The GCRA scripts hand tats and TTLs to redis.call as Lua numbers, which
// Redis writes with %.17g: the stored state must be exactly the decimal
// digits, up to the largest instant Decide works with.
func TestGCRAStoresExactDigits(t *testing.T) {
	s, c, _ := nodeStore(t, WithClientTime())
	ctx := context.Background()
	for _, pol := range []core.Policy{
		{Name: "one", Limits: []core.Limit{core.PerSecond(3)}},
		{Name: "two", Limits: []core.Limit{core.PerSecond(3), core.PerMinute(100)}},
	} {
		p := mustPolicy(t, pol)
		for _, now := range []time.Time{epoch, time.UnixMicro(core.MaxNow - 1_000_000), time.UnixMicro(1)} {
			key := "k" + strconv.FormatInt(now.UnixMicro(), 10)
			_, err := s.Take(ctx, key, p, now, 1)
			require.NoError(t, err)
			ks, err := s.Keys(p, key)
			require.NoError(t, err)
			for i, l := range p.Limits {
				got, err := c.Get(ctx, ks[i]).Result()
				require.NoError(t, err, "%s limit %d", p.Name, i)
				want := now.UnixMicro() + core.EmissionInterval(l)
				assert.Equal(t, strconv.FormatInt(want, 10), got, "%s limit %d at %d", p.Name, i, now.UnixMicro())
				ttl, err := c.PTTL(ctx, ks[i]).Result()
				require.NoError(t, err)
				assert.Positive(t, ttl)
			}
		}
	}
}
