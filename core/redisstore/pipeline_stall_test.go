package redisstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
// decision. A decision counts when it failed while Redis was stopped
// (its error returned before the resume): one that fails after the
// resume is a timeout on a live Redis, not the subject, even when it
// started during the stop. On a loaded host such a decision may reach
// its socket only after the resume, be run, and time out all the same;
// classifying decisions by their start counted those and broke the
// bound (48 charged against 36 at load 20).
func TestPipeliningStallChargesBounded(t *testing.T) {
	const maxBatch, senders, callers = 8, 2, 128
	const timeout = 250 * time.Millisecond // on a host at load 30, most 100 ms decisions time out and none flow
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	st := newStore(t, c, WithClientTime(), WithPipelining(Pipelining{MaxBatch: maxBatch, Senders: senders}))
	p := mustPolicy(t, core.Policy{Name: "stall", Algorithm: core.FixedWindow, Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	lim := core.MustNewLimiter(st, *p, core.WithTimeout(timeout), core.WithClock(core.NewManualClock(epoch)))
	ctx := context.Background()
	var ok, seq atomic.Int64
	var stop, resumed atomic.Bool
	var mu sync.Mutex
	var failed []string // keys of the decisions that failed while Redis was stopped
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				key := fmt.Sprint("k", seq.Add(1))
				if _, err := lim.Allow(ctx, key); err == nil {
					ok.Add(1)
				} else if !resumed.Load() {
					mu.Lock()
					failed = append(failed, key)
					mu.Unlock()
				}
			}
		}()
	}
	waitFor(t, func() bool { return ok.Load() > 300 }, "decisions flow")
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
	// Redis runs nothing in [t1, t2]: t1 is read after SIGSTOP was sent,
	// t2 before SIGCONT is; a starved test only narrows the interval.
	t1 := time.Now().UnixMilli()
	waitFor(t, func() bool { return time.Since(start) > time.Second }, "a one-second stop")
	resumed.Store(true)
	stopped := time.Since(start)
	t2 := time.Now().UnixMilli()
	srv.Resume()
	n := ok.Load()
	waitFor(t, func() bool { return ok.Load() > n+300 }, "decisions flow after the stop")
	stop.Store(true)
	wg.Wait()
	// Redis has run every call written before the stop once it answers
	// a fresh one
	_, err := st.Take(ctx, "fresh", p, epoch, 0)
	require.NoError(t, err)
	// Which failed calls Redis ran after the stop: every key is written
	// once, with a TTL relative to Redis's clock and the same for every
	// key (the manual clock is fixed), so a key's PEXPIRETIME is the
	// instant Redis ran its call plus a constant c, bounded below by
	// probes. A failed decision that Redis ran before the stop is a
	// timeout on a live Redis (a starved caller), not the subject.
	lo, hi := ttlConstant(t, st, p, c)
	mid := t1 + (t2-t1)/2
	require.Less(t, hi-lo, (t2-t1)/2, "the probes should pin the TTL constant within half the stop")
	charged := 0
	for _, k := range failed {
		keys, err := st.Keys(p, k)
		require.NoError(t, err)
		at, err := c.PExpireTime(ctx, keys[0]).Result()
		require.NoError(t, err)
		if at > 0 && at.Milliseconds()-lo > mid { // ran after t2: nothing ran in [t1, t2]
			charged++
		}
	}
	bound := maxBatch*senders + pool
	t.Logf("stopped %v: %d decisions failed during the stop; Redis charged %d of them after it (bound %d; TTL constant pinned to %d ms)", stopped, len(failed), charged, bound, hi-lo)
	require.NotEmpty(t, failed)
	assert.LessOrEqual(t, charged, bound, "failed decisions charged by Redis later")
}

// ttlConstant bounds the constant c = PEXPIRETIME − the instant Redis ran
// the call, the same for every fresh key of p (ms): each probe's call ran
// between the readings of the clock around it, so c lies in the
// intersection of the intervals the probes give; the fastest probe
// (on a loaded host, one is fast sooner or later) makes it narrow.
func ttlConstant(t *testing.T, st *redisStore, p *core.Policy, c *redis.Client) (lo, hi int64) {
	t.Helper()
	ctx := context.Background()
	lo, hi = math.MinInt64, math.MaxInt64
	for i := 0; i < 2000 && (i == 0 || hi-lo > 20); i++ {
		key := fmt.Sprint("probe", i)
		before := time.Now().UnixMilli() - 1 // Redis's mstime and the readings round apart by < 1 ms
		_, err := st.Take(ctx, key, p, epoch, 1)
		require.NoError(t, err)
		after := time.Now().UnixMilli() + 1
		keys, err := st.Keys(p, key)
		require.NoError(t, err)
		at, err := c.PExpireTime(ctx, keys[0]).Result()
		require.NoError(t, err)
		require.Positive(t, at, "a probe's key has a TTL")
		lo, hi = max(lo, at.Milliseconds()-after), min(hi, at.Milliseconds()-before)
	}
	require.LessOrEqual(t, lo, hi, "the probes disagree: keys' TTLs are not one constant")
	return lo, hi
}
