package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
)

// BenchmarkSourced: one decision through a Sourced whose answer is
// cached (Select, then AllowN under the identity's own limits) against
// the same decision without a source, in the same run; 1,000 identities,
// all found.
func BenchmarkSourced(b *testing.B) {
	const ids = 1000
	keys := make([]string, ids)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	src := func(context.Context, string) ([]core.Limit, bool, error) {
		return []core.Limit{core.PerHour(1e9)}, true, nil
	}
	pol := core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(1e9)}}
	ctx := context.Background()
	for _, mode := range []string{"without_source", "cached_source"} {
		store := mustMem()
		def := core.MustNewLimiter(store, pol)
		s, err := core.NewSourced(def, src, core.SourceConfig{TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		pick := func(id string) *core.Limiter {
			if mode == "cached_source" {
				return s.Select(ctx, id)
			}
			return def
		}
		for _, k := range keys {
			pick(k)
		}
		b.Run(mode+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				k := keys[i%ids]
				if _, err := pick(k).AllowN(ctx, k, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					k := keys[i%ids]
					i++
					if _, err := pick(k).AllowN(ctx, k, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		store.Close()
	}
}
