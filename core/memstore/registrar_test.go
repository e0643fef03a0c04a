package memstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storetest"
)

// TestRegistry: one name with two limits fails at NewLimiter (issue 22).
func TestRegistry(t *testing.T) {
	storetest.RunRegistry(t, func(t *testing.T) core.Store {
		s := memstore.MustNew()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestStoreLimitsFailAtConstruction: the policy cap and the memory budget
// are refused by NewLimiter, not by Take on the request path.
func TestStoreLimitsFailAtConstruction(t *testing.T) {
	s := memstore.MustNew(memstore.WithMaxPolicies(2))
	defer s.Close()
	p := func(name string) core.Policy { return core.Policy{Name: name, Limits: []core.Limit{core.PerMinute(5)}} }
	a := core.MustNewLimiter(s, p("a"))
	core.MustNewLimiter(s, p("b"))
	_, err := core.NewLimiter(s, p("c"))
	require.ErrorContains(t, err, "WithMaxPolicies")
	a.Release()
	_, err = core.NewLimiter(s, p("c"))
	require.NoError(t, err, "a released name makes room")

	small := memstore.MustNew(memstore.WithMaxStateBytes(64))
	defer small.Close()
	_, err = core.NewLimiter(small, p("a"))
	require.ErrorContains(t, err, "raise the budget")
}

// TestReleaseDropsTheTable: the last Release of a name drops its table
// and keys; an equal Limiter still live keeps them.
func TestReleaseDropsTheTable(t *testing.T) {
	s := memstore.MustNew()
	defer s.Close()
	ctx := context.Background()
	p := core.Policy{Name: "a", Limits: []core.Limit{core.PerMinute(5)}}
	l1 := core.MustNewLimiter(s, p)
	l2 := core.MustNewLimiter(s, p)
	_, err := l1.Allow(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, memstore.Stats{Keys: 1, Policies: 1}, trim(s.Stats()))
	l1.Release()
	assert.Equal(t, 1, s.Stats().Keys, "l2 still uses the table")
	l2.Release()
	assert.Equal(t, memstore.Stats{}, trim(s.Stats()))
	assert.Equal(t, 0, s.Registered())
}

func trim(st memstore.Stats) memstore.Stats { st.Bytes = 0; return st }

// TestRegisterReleaseConcurrent: Limiters built, used and released per
// request on many goroutines, two configurations taking one name over in
// turn (a reload storm): no decision fails, and nothing is left at the
// end.
func TestRegisterReleaseConcurrent(t *testing.T) {
	s := memstore.MustNew()
	defer s.Close()
	ctx := context.Background()
	a := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(1000)}}
	b := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(2000)}}
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				l, err := core.NewLimiter(s, a)
				if err != nil {
					continue // b holds the name: refused at construction, never in Take
				}
				if _, err := l.Allow(ctx, "k"+strconv.Itoa(i%7)); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
				l.Release()
			}
		}()
	}
	var cur *core.Limiter
	for i := 0; i < 300; i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		next, err := core.NewLimiter(s, p, core.Replacing(cur))
		if err == nil {
			if cur != nil {
				cur.Release()
			}
			cur = next
		}
		if cur != nil {
			_, err = cur.Allow(ctx, "k")
			require.NoError(t, err)
		}
	}
	wg.Wait()
	if cur != nil {
		cur.Release()
	}
	select {
	case err := <-errs:
		t.Fatalf("a decision failed: %v", err)
	default:
	}
	assert.Equal(t, 0, s.Registered())
	assert.Equal(t, 0, s.Stats().Policies)
}
