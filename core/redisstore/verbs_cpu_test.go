package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/limitkit/limitkit/internal/redistest"
)

// BenchmarkVerbs reports Redis's CPU per script call of each verb
// (redis-µs/call, from INFO commandstats, reset per sub-benchmark) with
// Take as the baseline, for every policy of benchPolicies, serially, at
// Redis's clock. Keys rotate over 1,000 users; the verbs run in the order
// Take, Charge, Refund, Peek, Reserve (Wait's call), Reset, so each finds
// the state the previous ones left (Reset last: it deletes the keys).
func BenchmarkVerbs(b *testing.B) {
	srv := redistest.StartNode(b)
	c := srv.NewClient(b)
	s := newStore(b, c)
	ctx := context.Background()
	if err := s.Preload(ctx); err != nil {
		b.Fatal(err)
	}
	keys := benchKeys(1000)
	names := map[byte]string{'A': "take", 'C': "charge", 'R': "refund", 'P': "peek", 'W': "reserve", 'X': "reset"}
	for _, pol := range benchPolicies() {
		p := &pol
		for _, v := range []byte("ACRPWX") {
			b.Run(p.Name+"/"+names[v], func(b *testing.B) {
				b.ReportAllocs()
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				for i := 0; b.Loop(); i++ {
					if _, err := storeVerb(ctx, s, v, keys[i%len(keys)], p, time.Time{}, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportScriptStats(b, ctx, c)
			})
		}
	}
}
