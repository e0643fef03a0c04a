package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Helpers that put a pipelined store's lane in the state a test needs:
// held, with calls queued, or with calls in flight on a frozen node.

// hold makes l look busy, a send in flight and every sender alive, so
// that decisions queue; release undoes it and gets a sender to them.
func hold(l *lane) {
	l.inflight.Add(1)
	l.mu.Lock()
	l.busy += l.p.cfg.Senders
	l.mu.Unlock()
}

func release(l *lane) {
	l.inflight.Add(-1)
	l.mu.Lock()
	l.busy -= l.p.cfg.Senders
	l.spawn()
	l.mu.Unlock()
}

// queued is the number of calls in l's queue.
func queued(l *lane) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.q)
}

// waitFor polls cond every millisecond for up to a minute, failing the
// test if it never holds.
func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting: "+fmt.Sprintf(format, args...))
		time.Sleep(time.Millisecond)
	}
}

// patientClient is a client of srv whose reads and writes wait two
// minutes, so that a frozen server fails no pipeline before the
// deadlines a test gives its decisions.
func patientClient(t *testing.T, srv *redistest.Server) *redis.Client {
	o := srv.ClientOptions()
	o.ReadTimeout, o.WriteTimeout = 2*time.Minute, 2*time.Minute
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// unreachableClient is a client of an address nothing listens on.
func unreachableClient(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// defaultLane is a lane with the default Pipelining fields over an
// unreachableClient, for tests that drive its queue by hand.
func defaultLane(t *testing.T) *lane {
	p := &pipeliner{cfg: Pipelining{MaxBatch: defaultMaxBatch, MaxQueue: defaultMaxQueue, Senders: defaultSenders}}
	return p.newLane(unreachableClient(t))
}

// takeOne makes one decision of cost 1 on key at epoch, failing the test
// on error.
func takeOne(t *testing.T, st *redisStore, key string, p *core.Policy) core.Decision {
	t.Helper()
	d, err := st.Take(context.Background(), key, p, epoch, 1)
	require.NoError(t, err)
	return d
}

// warmLane makes one decision on "warm" (sent directly, a lone call) so
// that the pipelined st has its single lane, and returns that lane.
func warmLane(t *testing.T, st *redisStore, p *core.Policy) *lane {
	t.Helper()
	takeOne(t, st, "warm", p)
	l := st.pipe.single.Load()
	require.NotNil(t, l)
	return l
}

// queueN runs take(0) to take(n-1), each on a goroutine of its own, and
// waits until l's queue holds n calls: l is held, so none is sent before
// the test releases it. wait waits for the n to return.
func queueN(t *testing.T, l *lane, n int, take func(i int)) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { take(i) })
	}
	waitFor(t, func() bool { return queued(l) == n }, "%d decisions queued", n)
	return wg.Wait
}

// takeTogether makes n decisions of 1 on "k" under p, each on a
// goroutine of its own, held in l's queue until all n are there, and
// waits for them once a sender has them; each must succeed.
func takeTogether(t *testing.T, st *redisStore, l *lane, p *core.Policy, n int) {
	t.Helper()
	hold(l)
	wait := queueN(t, l, n, func(int) {
		_, err := st.Take(context.Background(), "k", p, epoch, 1)
		assert.NoError(t, err)
	})
	release(l)
	wait()
}

// queueOne runs take on a goroutine of its own and waits until l's queue
// holds want calls, take's the last; take's error comes on the channel.
func queueOne(t *testing.T, l *lane, want int, what string, take func() error) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- take() }()
	waitFor(t, func() bool { return queued(l) == want }, "%s queued", what)
	return res
}

// freezeTwoInFlight pauses srv and runs take twice, each on a goroutine
// of its own: with Senders 1 one goes out directly and one in a
// pipeline, and it returns once both are in flight on the frozen node
// and nothing is queued. wait waits for the two, which must succeed once
// srv resumes.
func freezeTwoInFlight(t *testing.T, srv *redistest.Server, l *lane, take func() error) (wait func()) {
	t.Helper()
	srv.Pause()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { assert.NoError(t, take()) })
	}
	waitFor(t, func() bool { return l.inflight.Load() >= 2 && queued(l) == 0 }, "two decisions in flight, none queued")
	return wg.Wait
}
