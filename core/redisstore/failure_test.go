package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	failTimeout = 50 * time.Millisecond
	// failMargin is what a call may take beyond its deadline: scheduling on
	// a loaded 2-core machine under -race, not waiting on Redis (a hang would
	// be seconds: go-redis's own timeouts are 3 s).
	failMargin = 400 * time.Millisecond
)

// burst makes n concurrent calls through l on distinct keys and checks each
// returns within the deadline + margin; it returns the errors.
func burst(t *testing.T, l *core.Limiter, n int) []error {
	t.Helper()
	errs := make([]error, n)
	took := make([]time.Duration, n)
	decs := make([]core.Decision, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			decs[i], errs[i] = l.Allow(context.Background(), fmt.Sprintf("user-%d", i))
			took[i] = time.Since(start)
		}(i)
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		assert.LessOrEqual(t, took[i], failTimeout+failMargin, "call %d took %v", i, took[i])
		if errs[i] != nil {
			var se *core.StoreError
			require.ErrorAs(t, errs[i], &se)
			assert.True(t, decs[i].Degraded)
			assert.Equal(t, l.Policy().FailMode == core.FailOpen, decs[i].Allowed)
		}
	}
	return errs
}

// healthy requires that calls succeed again: a whole burst without an
// error, within 10 s (the first calls after an outage may still time out
// while the pool reconnects and, on a cluster, reloads the slots).
func healthy(t *testing.T, l *core.Limiter) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		failed := 0
		for _, err := range burst(t, l, 20) {
			if err != nil {
				failed++
			}
		}
		if failed == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d of 20 calls failing 10s after recovery", failed)
		}
	}
}

func limiters(t *testing.T, s core.Store) []*core.Limiter {
	var ls []*core.Limiter
	for _, m := range []core.FailMode{core.FailOpen, core.FailClosed} {
		l, err := core.NewLimiter(s, core.Policy{Name: "fail-" + m.String(), FailMode: m,
			Limits: []core.Limit{core.PerSecond(1000)}}, core.WithTimeout(failTimeout))
		require.NoError(t, err)
		ls = append(ls, l)
	}
	return ls
}

// TestRedisDownNode: with the server frozen (SIGSTOP: connections accepted,
// nothing answered) and then killed, every call returns within the
// deadline + margin with the fail mode applied; once Redis is back,
// decisions are normal; no goroutine outlives the client.
func TestRedisDownNode(t *testing.T) {
	srv := redistest.StartNode(t)
	before := runtime.NumGoroutine() // after the server's process-waiting goroutine
	c := redis.NewClient(srv.ClientOptions())
	s := newStore(t, c)
	ls := limiters(t, s)
	for _, l := range ls {
		healthy(t, l)
	}

	srv.Pause()
	for _, l := range ls {
		errs := burst(t, l, 30)
		for _, err := range errs {
			require.Error(t, err)
			assert.Equal(t, core.ErrorTimeout, core.ClassifyError(err), "a frozen Redis is a timeout: %v", err)
		}
	}
	srv.Resume()
	for _, l := range ls {
		healthy(t, l)
	}

	srv.Kill()
	for _, l := range ls {
		for _, err := range burst(t, l, 30) {
			require.Error(t, err)
		}
	}
	srv.Restart() // empty script cache: EVALSHA's NOSCRIPT must stay invisible
	for _, l := range ls {
		healthy(t, l)
	}

	require.NoError(t, c.Close())
	noLeak(t, before)
}

// TestRedisDownCluster: one master of three frozen, then killed: calls
// still return within the deadline + margin (keys on the other masters keep
// working), and everything recovers after a restart.
func TestRedisDownCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	before := runtime.NumGoroutine()
	c := redis.NewClusterClient(cl.ClusterOptions())
	s := newStore(t, c)
	ls := limiters(t, s)
	for _, l := range ls {
		healthy(t, l)
	}

	victim := cl.Nodes[0]
	victim.Pause()
	for _, l := range ls {
		failed := 0
		for _, err := range burst(t, l, 30) {
			if err != nil {
				failed++
			}
		}
		assert.Positive(t, failed, "keys on the frozen master fail")
		assert.Less(t, failed, 30, "keys on the other masters still work")
	}
	victim.Resume()
	for _, l := range ls {
		healthy(t, l)
	}

	victim.Kill()
	for _, l := range ls {
		burst(t, l, 30)
	}
	victim.Restart()
	cl.WaitReady(t)
	for _, l := range ls {
		healthy(t, l)
	}

	require.NoError(t, c.Close())
	noLeak(t, before)
}

// noLeak waits for the goroutine count to fall back to before (go-redis
// ends its goroutines asynchronously after Close), and dumps the goroutines
// if it does not. It polls by hand: assert.Eventually runs its condition on
// goroutines of its own.
func noLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: before %d, now %d\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
