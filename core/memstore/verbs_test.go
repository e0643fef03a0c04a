package memstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/conformkit"
	"github.com/limitkit/limitkit/core/storetest"
)

var verbAlgorithms = []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}

// applyModel applies verb v to a plain state with core's model: what the
// store must do under its lock.
func applyModel(c *core.Compiled, st []int64, v byte, now, cost int64) core.Decision {
	return conformkit.ApplyVerb(c, st, v, now, cost, 2_000_000)
}

func applyStore(t *testing.T, s *memStore, key string, p *core.Policy, v byte, now time.Time, cost int64) core.Decision {
	ctx := context.Background()
	var d core.Decision
	var err error
	switch v {
	case 'A':
		d, err = s.Take(ctx, key, p, now, cost)
	case 'P':
		d, err = s.Peek(ctx, key, p, now, cost)
	case 'C':
		d, err = s.Charge(ctx, key, p, now, cost)
	case 'R':
		d, err = s.Credit(ctx, key, p, now, cost)
	case 'W':
		d, err = s.Reserve(ctx, key, p, now, cost, 2*time.Second)
	case 'X':
		err = s.Reset(ctx, key, p)
	}
	require.NoError(t, err)
	return d
}

// TestVerbsMatchModel drives the store and core's model through the same
// random steps (every verb, clock steps back and forward, huge costs,
// one limit and two) and compares every decision.
func TestVerbsMatchModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	for _, alg := range verbAlgorithms {
		for _, limits := range [][]core.Limit{{core.PerSecond(5)}, {core.PerSecond(5), core.Per(12, 10*time.Second)}} {
			p := &core.Policy{Name: fmt.Sprintf("%s-%d", alg, len(limits)), Algorithm: alg, Limits: limits}
			if alg == core.SlidingWindowCounter {
				p.Buckets = 4
			}
			c, err := p.Compile()
			require.NoError(t, err)
			s := mustNew()
			st := make([]int64, c.StateWords())
			now := time.Unix(1_767_000_000, 0)
			for i := range 4000 {
				if rng.IntN(12) == 0 {
					now = now.Add(-time.Duration(rng.Int64N(int64(30 * time.Second))))
				} else {
					now = now.Add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
				}
				cost := rng.Int64N(7)
				if rng.IntN(25) == 0 {
					cost = math.MaxInt64 - rng.Int64N(2)
				}
				v := "APCRWX"[rng.IntN(6)]
				want := applyModel(c, st, v, now.UnixMicro(), cost)
				got := applyStore(t, s, "key", p, v, now, cost)
				require.Equal(t, want, got, "%s step %d: %c cost %d", p.Name, i, v, cost)
			}
			s.Close()
		}
	}
}

// TestVerbsDoNotAllocate: the verbs on a held key allocate nothing.
func TestVerbsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	for _, alg := range verbAlgorithms {
		s := mustNew()
		p := &core.Policy{Name: "a", Algorithm: alg, Limits: []core.Limit{core.PerSecond(100)}}
		now := time.Unix(1_767_000_000, 0)
		_, _ = s.Take(ctx, "k", p, now, 1)
		n := testing.AllocsPerRun(100, func() {
			_, _ = s.Peek(ctx, "k", p, now, 1)
			_, _ = s.Charge(ctx, "k", p, now, 2)
			_, _ = s.Credit(ctx, "k", p, now, 1)
			_, _ = s.Reserve(ctx, "k", p, now, 1, time.Second)
		})
		require.Zero(t, n, "%s", alg)
		s.Close()
	}
}

// TestVerbsConcurrentExact mixes Take, Charge and Refund on a few keys
// from many goroutines at one instant (no refill), with a quota large
// enough that no cap binds, so every order leaves the same state: the
// final state must be the sequential model's.
func TestVerbsConcurrentExact(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_767_000_000, 0)
	for _, alg := range verbAlgorithms {
		limit := core.Per(1_000_000, time.Hour)
		if alg == core.SlidingWindowLog {
			limit = core.Per(20_000, time.Hour) // a ring of one slot per unit
		}
		p := &core.Policy{Name: "x", Algorithm: alg, Limits: []core.Limit{limit}}
		s := mustNew()
		keys := []string{"a", "b", "c"}
		const G, N = 16, 200
		var wg sync.WaitGroup
		for g := range G {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range N {
					k := keys[(g+i)%len(keys)]
					_, _ = s.Take(ctx, k, p, now, 1)
					_, _ = s.Charge(ctx, k, p, now, 3)
					if alg != core.SlidingWindowLog {
						_, _ = s.Credit(ctx, k, p, now, 2) // after this goroutine's own charge: never below 0
					}
				}
			}()
		}
		wg.Wait()
		c, err := p.Compile()
		require.NoError(t, err)
		for _, k := range keys {
			st := make([]int64, c.StateWords())
			for i := 0; i < G*N/len(keys)+1; i++ {
				if countFor(k, keys, G, N) == i {
					break
				}
				applyModel(c, st, 'A', now.UnixMicro(), 1)
				applyModel(c, st, 'C', now.UnixMicro(), 3)
				if alg != core.SlidingWindowLog {
					applyModel(c, st, 'R', now.UnixMicro(), 2)
				}
			}
			want := applyModel(c, st, 'P', now.UnixMicro(), 1)
			got, err := s.Peek(ctx, k, p, now, 1)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s key %s", alg, k)
		}
		s.Close()
	}
}

// countFor is how many rounds key k got in TestVerbsConcurrentExact.
func countFor(k string, keys []string, g, n int) int {
	c := 0
	for gi := range g {
		for i := range n {
			if keys[(gi+i)%len(keys)] == k {
				c++
			}
		}
	}
	return c
}

// TestVerbsConformance runs the verbs' suite (what a user of the
// Limiter's verbs is promised) on the embedded store.
func TestVerbsConformance(t *testing.T) {
	storetest.RunVerbs(t, func(t *testing.T) core.Store {
		s := mustNew()
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.VerbOptions{})
}
