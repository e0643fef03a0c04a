package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestPipeliningStallChargesBounded: while Redis is stopped (SIGSTOP),
// pipelined decisions fail by their deadlines; once it resumes, Redis
// runs the calls that were already written to its sockets, and charges
// them though their callers saw them fail. Each sender has one pipeline
// in flight, a timed-out connection is closed, and a new one carries no
// call before Redis answers go-redis's HELLO, so what is charged for
// decisions that failed during the stop stays within the bound
// docs/redis-pipelining.md states, whatever the stop's length:
// MaxBatch × Senders (the pipelines in flight when Redis stopped) plus
// one call per pooled connection open then (PoolSize at most; the pool
// is filled with idle connections before the stop). Each decision has a
// key of its own, so that what Redis charged is read per failed
// decision; the decisions started after the resume are left out (one
// that fails then is a timeout on a live Redis, not the subject).
func TestPipeliningStallChargesBounded(t *testing.T) {
	const maxBatch, senders, callers = 8, 2, 128
	const timeout = 100 * time.Millisecond
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	st := newStore(t, c, WithClientTime(), WithPipelining(Pipelining{MaxBatch: maxBatch, Senders: senders}))
	p := mustPolicy(t, core.Policy{Name: "stall", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	lim := core.MustNewLimiter(st, *p, core.WithTimeout(timeout), core.WithClock(core.NewManualClock(epoch)))
	ctx := context.Background()
	var ok, seq atomic.Int64
	var stop, resumed atomic.Bool
	var mu sync.Mutex
	var failed []string // keys of the decisions started before the resume that failed
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				key := fmt.Sprint("k", seq.Add(1))
				before := !resumed.Load()
				if _, err := lim.Allow(ctx, key); err == nil {
					ok.Add(1)
				} else if before {
					mu.Lock()
					failed = append(failed, key)
					mu.Unlock()
				}
			}
		}()
	}
	waitFor(t, func() bool { return ok.Load() > 1000 }, "decisions flow")
	pool := c.Options().PoolSize
	var pings sync.WaitGroup
	for range pool {
		pings.Add(1)
		go func() { defer pings.Done(); _ = c.Ping(ctx).Err() }()
	}
	pings.Wait()
	t.Logf("%d connections open, pool size %d", c.PoolStats().TotalConns, pool)
	start := time.Now()
	srv.Pause()
	waitFor(t, func() bool { return time.Since(start) > time.Second }, "a one-second stop")
	resumed.Store(true)
	stopped := time.Since(start)
	srv.Resume()
	n := ok.Load()
	waitFor(t, func() bool { return ok.Load() > n+1000 }, "decisions flow after the stop")
	stop.Store(true)
	wg.Wait()
	// Redis has run every call written before the stop once it answers
	// a fresh one
	_, err := st.Take(ctx, "fresh", p, epoch, 0)
	require.NoError(t, err)
	charged := 0
	for _, k := range failed {
		keys, err := st.Keys(p, k)
		require.NoError(t, err)
		if c.Exists(ctx, keys[0]).Val() == 1 {
			charged++
		}
	}
	bound := maxBatch*senders + pool
	t.Logf("stopped %v: %d decisions started before the resume failed; Redis charged %d of them (bound %d)", stopped, len(failed), charged, bound)
	require.NotEmpty(t, failed)
	assert.LessOrEqual(t, charged, bound, "failed decisions charged by Redis later")
}
