package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
	"github.com/limitkit/limitkit/internal/redistest"
)

// deadlineHook records the deadline of the last command's context.
type deadlineHook struct{ last atomic.Int64 }

func (h *deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if dl, ok := ctx.Deadline(); ok {
			h.last.Store(dl.UnixNano())
		}
		return next(ctx, cmd)
	}
}

func (h *deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestStarvedProcessMovesTheDeadline: TakeBy's deadline is moved later by
// the process's recent scheduling latency, at most three times its own
// length, on an injected probe (no loop: the machine's load adds
// nothing). With no wait to run recorded, a paused Redis (CLIENT PAUSE
// WRITE: scripts wait)
// fails a 250 ms deadline; with the process seen starved (a 10 s wait to
// run), a call with a 1 s deadline that Redis answers only after that
// deadline (the pause is lifted once it passed) is decided: its deadline
// moved by three; a 30 ms wait moves the deadline the command runs under
// by exactly 30 ms, a 10 s one by at most three deadlines.
func TestStarvedProcessMovesTheDeadline(t *testing.T) {
	srv := redistest.StartNode(t)
	// read timeouts past the test's deadlines (NewClient's 500 ms bound
	// every socket read, the moved deadline's too)
	c, err := NewClient("redis://"+srv.Addr, func(cfg *ClientConfig) {
		cfg.Node.ReadTimeout, cfg.Node.WriteTimeout = redistest.StoreTimeout, redistest.StoreTimeout
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	hook := &deadlineHook{}
	c.AddHook(hook)
	s := newStore(t, c)
	probe := schedlag.New()
	s.lag = probe
	p := mustPolicy(t, core.Policy{Name: "starved", Limits: []core.Limit{core.PerMinute(1000)}})
	ctx := context.Background()
	_, err = s.TakeBy(ctx, time.Now().Add(redistest.StoreTimeout), "k", p, time.Time{}, 1) // loads the script
	require.NoError(t, err)

	const budget = 250 * time.Millisecond
	take := func(budget time.Duration) error {
		_, err := s.TakeBy(ctx, time.Now().Add(budget), "k", p, time.Time{}, 1)
		return err
	}
	pause := func(args ...string) {
		_, err := srv.Do(append([]string{"CLIENT"}, args...)...)
		require.NoError(t, err)
	}
	pause("PAUSE", "10000", "WRITE")
	err = take(budget)
	require.Error(t, err, "not starved: a paused Redis fails the deadline")
	assert.Equal(t, "timeout", core.ClassifyError(err))
	pause("UNPAUSE")

	// starved: a call that Redis answers only after its deadline passed
	// (the test lifts the pause then) is decided within the moved one
	probe.Record(probe.Now(), 10*time.Second)
	pause("PAUSE", "10000", "WRITE")
	dl := time.Now().Add(time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := s.TakeBy(ctx, dl, "k", p, time.Time{}, 1)
		done <- err
	}()
	for !time.Now().After(dl) { // the call's own deadline passes
		time.Sleep(time.Millisecond)
	}
	pause("UNPAUSE")
	err = <-done
	require.NoError(t, err, "starved: the deadline moved past the pause")

	for _, c := range []struct {
		lag, want time.Duration
	}{{30 * time.Millisecond, 30 * time.Millisecond}, {10 * time.Second, 3 * budget}} {
		probe = schedlag.New()
		s.lag = probe
		probe.Record(probe.Now(), c.lag)
		dl := time.Now().Add(budget)
		_, err := s.TakeBy(ctx, dl, "k", p, time.Time{}, 1)
		require.NoError(t, err)
		moved := time.Duration(hook.last.Load() - dl.UnixNano())
		if c.lag < budget {
			assert.Equal(t, c.want, moved, "moved by the wait to run")
		} else {
			assert.LessOrEqual(t, moved, c.want, "moved by at most three deadlines")
			assert.Greater(t, moved, 2*budget, "moved by about three deadlines")
		}
	}
}

// TestColdProbeMovesTheDeadline: the plain store's probe (Shared's)
// starts on demand, so a process's first decisions (or the first after
// an idle second) come before it has measured anything: TakeBy then
// moves the deadline the command runs under by the most (three times
// its length), and once the probe's loop has watched for a Window
// without seeing a wait, not at all. Injected probes, no loop: the
// machine's load adds nothing.
func TestColdProbeMovesTheDeadline(t *testing.T) {
	srv := redistest.StartNode(t)
	c, err := NewClient("redis://"+srv.Addr, func(cfg *ClientConfig) {
		cfg.Node.ReadTimeout, cfg.Node.WriteTimeout = redistest.StoreTimeout, redistest.StoreTimeout
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	hook := &deadlineHook{}
	c.AddHook(hook)
	s := newStore(t, c)
	p := mustPolicy(t, core.Policy{Name: "cold", Limits: []core.Limit{core.PerMinute(1000)}})
	ctx := context.Background()
	_, err = s.TakeBy(ctx, time.Now().Add(redistest.StoreTimeout), "k", p, time.Time{}, 1) // loads the script
	require.NoError(t, err)

	const budget = 2 * time.Second
	moved := func() time.Duration {
		dl := time.Now().Add(budget)
		_, err := s.TakeBy(ctx, dl, "k", p, time.Time{}, 1)
		require.NoError(t, err)
		return time.Duration(hook.last.Load() - dl.UnixNano())
	}
	s.lag = schedlag.NewOnDemand() // as Shared's before its loop ran
	d := moved()
	assert.LessOrEqual(t, d, 3*budget, "moved by at most three deadlines")
	assert.Greater(t, d, 2*budget, "cold: moved by about three deadlines")
	// the deadline a core.Limiter gives the quota verbs moves alike
	dl := time.Now().Add(budget)
	assert.Greater(t, s.MoveDeadline(dl).Sub(dl), 2*budget, "MoveDeadline, cold")

	s.lag = schedlag.New() // a probe run by its owner (never blind) that saw no wait
	assert.Zero(t, moved(), "warm, no wait: the deadline given")
}
