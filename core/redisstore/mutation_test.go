package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests written for mutations that survived the suite (issue 41); each
// mutation is listed in .ci/mutations/stores.txt with the test that kills
// it.

// TestPipeliningRoomWaitKeepsTheDeadline: a Limiter's decision that finds
// its lane's queue full (MaxQueue 1, the lane held busy) waits for room
// only until the Limiter's per-call deadline (50 ms, given to the store as
// TakeBy's time, not in the context) and returns
// context.DeadlineExceeded; it does not wait until its caller's context
// ends (the caller cancels it 20 s later, and would then see
// context.Canceled).
func TestPipeliningRoomWaitKeepsTheDeadline(t *testing.T) {
	srv := redistest.StartNode(t)
	st := newStore(t, srv.NewClient(t), WithClientTime(), WithPipelining(Pipelining{MaxQueue: 1}))
	p := mustPolicy(t, core.Policy{Name: "room", Limits: []core.Limit{core.Per(100, time.Hour)}})
	l := warmLane(t, st, p)
	hold(l)
	first := queueOne(t, l, 1, "the decision that fills the queue", func() error {
		_, err := st.Take(context.Background(), "k", p, epoch, 1)
		return err
	})

	lim := core.MustNewLimiter(st, *p, core.WithTimeout(50*time.Millisecond), core.WithLogger(nil))
	ctx, cancel := context.WithCancel(context.Background())
	stopper := time.AfterFunc(20*time.Second, cancel) // only under the bug
	defer stopper.Stop()
	defer cancel()
	_, err := lim.Allow(ctx, "k")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the wait for room ends at the decision's deadline")
	assert.NotErrorIs(t, err, context.Canceled, "the decision waited for its caller's context instead")
	assert.NoError(t, ctx.Err(), "the caller's context was still live when the decision returned")
	assert.Equal(t, 1, queued(l), "the decision that found the queue full was not queued")

	release(l)
	require.NoError(t, <-first)
	assert.Equal(t, int64(100-2), takeOne(t, st, "k", p).Remaining, "only the queued decision was sent")
}

// TestTakeBatchPartlyFailedIsNoError: a batch whose entries fail only in
// part (one key holds a list, so its script fails with WRONGTYPE) returns
// no error: each entry carries its own result, the others were decided
// and counted by Redis. (A caller such as the fleet tier reads an error
// from TakeBatch as "nothing got through" and would forward again the
// units Redis counted.)
func TestTakeBatchPartlyFailedIsNoError(t *testing.T) {
	s, c, _ := nodeStore(t)
	p := mustPolicy(t, core.Policy{Name: "part", Limits: []core.Limit{core.Per(5, time.Second)}})
	ctx := context.Background()
	_, err := s.Take(ctx, "bad", p, epoch, 1)
	require.NoError(t, err)
	keys, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1, "the one key \"bad\" made (a fresh server)")
	require.NoError(t, c.Del(ctx, keys[0]).Err())
	require.NoError(t, c.LPush(ctx, keys[0], "x").Err())

	b := []storekit.BatchTake{
		{Key: "good", Policy: p, Now: epoch, Cost: 2},
		{Key: "bad", Policy: p, Now: epoch, Cost: 1},
		{Key: "good", Policy: p, Now: epoch, Cost: 1},
	}
	require.NoError(t, s.TakeBatch(ctx, b), "a batch that failed in part is no error")
	require.NoError(t, b[0].Err)
	require.NoError(t, b[2].Err)
	require.Error(t, b[1].Err)
	assert.True(t, strings.Contains(b[1].Err.Error(), "WRONGTYPE"), "%v", b[1].Err)
	assert.Equal(t, int64(2), b[2].Decision.Remaining, "the entries around the failed one were decided")

	for i := range b { // a batch where every entry fails is an error
		b[i].Key = "bad"
	}
	assert.Error(t, s.TakeBatch(ctx, b), "a batch that failed whole is an error")
}
