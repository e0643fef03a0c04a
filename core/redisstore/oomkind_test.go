package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestOOMKindEveryPath: a Redis out of memory (maxmemory + noeviction)
// refuses every write with an OOM reply, and each path of the store that
// writes reports it as "oom" (the metrics' kind="oom"), never as
// "other": Take plain and pipelined, TakeBatch (the fleet tier's sync,
// where every entry failing makes the batch's own error), Charge,
// Reserve and Refund.
func TestOOMKindEveryPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := redistest.StartNode(t, "--maxmemory-policy", "noeviction")
	c := srv.NewClient(t)
	plain := newStore(t, c, WithClientTime())
	piped := newStore(t, c, WithClientTime(), WithPipelining(Pipelining{}))
	algos := []core.Algorithm{core.GCRA, core.FixedWindow, core.TokenBucket, core.SlidingWindowLog, core.SlidingWindowCounter}
	var pols []*core.Policy
	for _, a := range algos {
		p := mustPolicy(t, core.Policy{Name: "oom-" + a.String(), Algorithm: a, Limits: []core.Limit{core.PerMinute(10)}})
		pols = append(pols, p)
		// state to refund, written before Redis runs out of memory
		_, err := plain.Take(ctx, "k", p, epoch, 2)
		require.NoError(t, err)
	}
	_, err := srv.Do("CONFIG", "SET", "maxmemory", "1")
	require.NoError(t, err)
	for _, p := range pols {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			check := func(path string, err error) {
				t.Helper()
				require.Error(t, err, path)
				assert.Equal(t, "oom", core.ClassifyError(err), "%s: %v", path, err)
			}
			_, err := plain.Take(ctx, "k", p, epoch, 1)
			check("Take", err)
			_, err = piped.Take(ctx, "k", p, epoch, 1)
			check("Take pipelined", err)
			b := []storekit.BatchTake{{Key: "k1", Policy: p, Now: epoch, Cost: 1}, {Key: "k2", Policy: p, Now: epoch, Cost: 1}}
			err = plain.TakeBatch(ctx, b)
			check("TakeBatch", err)
			for i := range b {
				check("TakeBatch entry", b[i].Err)
			}
			verbs := 0
			if _, err = plain.Charge(ctx, "k", p, epoch, 1); !errors.Is(err, core.ErrUnsupported) {
				check("Charge", err)
				verbs++
			}
			if _, err = plain.Reserve(ctx, "k", p, epoch, 1, time.Second); !errors.Is(err, core.ErrUnsupported) {
				check("Reserve", err)
				verbs++
			}
			if p.Refundable() {
				check("Refund", plain.Refund(ctx, "k", p, epoch, 1))
				verbs++
			}
			t.Logf("%d verbs checked", verbs)
		})
	}
}
