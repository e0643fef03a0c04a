package redisstore

import (
	"context"
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
// failed decisions stays within the bound docs/redis-pipelining.md
// states, whatever the stop's length: MaxBatch × Senders (the pipelines
// in flight when Redis stopped) plus one call per pooled connection open
// then (PoolSize at most; the pool is filled with idle connections
// before the stop).
func TestPipeliningStallChargesBounded(t *testing.T) {
	const maxBatch, senders, callers = 8, 2, 128
	const timeout = 100 * time.Millisecond
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	st := newStore(t, c, WithClientTime(), WithPipelining(Pipelining{MaxBatch: maxBatch, Senders: senders}))
	p := mustPolicy(t, core.Policy{Name: "stall", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	lim := core.MustNewLimiter(st, *p, core.WithTimeout(timeout), core.WithClock(core.NewManualClock(epoch)))
	ctx := context.Background()
	var ok, failed atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := lim.Allow(ctx, "k"); err != nil {
					failed.Add(1)
				} else {
					ok.Add(1)
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
	srv.Resume()
	stopped := time.Since(start)
	waitFor(t, func() bool { return ok.Load() > 0 && failed.Load() > 0 }, "")
	stop.Store(true)
	wg.Wait()
	// every call written has run once Redis answers a fresh one
	d, err := st.Take(ctx, "k", p, epoch, 0)
	require.NoError(t, err)
	charged := (int64(1)<<30 - d.Remaining)
	bound := int64(maxBatch*senders + pool)
	t.Logf("stopped %v: %d decisions succeeded, %d failed; Redis charged %d for failed ones (bound %d)", stopped, ok.Load(), failed.Load(), charged-ok.Load(), bound)
	require.NotZero(t, failed.Load())
	assert.GreaterOrEqual(t, charged, ok.Load(), "every success was charged")
	assert.LessOrEqual(t, charged-ok.Load(), bound, "failed decisions charged by Redis later")
}
