package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPipeliningNeverSendsTwiceCluster: on a three-master Cluster whose
// client reaches one master (hot) through a swallowProxy, decisions on
// hot's keys are cut off after hot ran their scripts: the connection
// closes (a network error, no MOVED) with every reply lost. go-redis's
// Cluster pipeline would remap such a batch to the slot's master and
// write it again, up to MaxRedirects times, and its single commands would
// go to the same node, then another; the options allow both. Each
// decision must fail or have been counted once; the masters together ran
// exactly one script per decision, and the key's state counts exactly
// that many. The replies of a connection opened after the cut pass, so a
// re-sent decision would succeed and be counted a second time.
func TestPipeliningNeverSendsTwiceCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	hot := cl.Nodes[1]
	// each cut on its own policy: its keys are fresh
	policy := func(t *testing.T) *core.Policy {
		return mustPolicy(t, core.Policy{Name: t.Name(), Limits: []core.Limit{core.Per(1000, time.Hour)}})
	}

	t.Run("pipelined", func(t *testing.T) {
		const n = 32
		p := policy(t)
		proxy, st, l, key := cutClusterStore(t, cl, hot, p)
		// queue all n before a sender runs, so that they go in one
		// pipeline: while the lane looks busy (a send in flight, every
		// sender alive) callers only queue
		hold(l)
		cutCluster(t, cl, hot, proxy, st, p, key, n, func() {
			waitFor(t, func() bool { return queued(l) == n }, "%d decisions queued", n)
			release(l)
		})
		assert.Equal(t, int64(n), l.batched.Load(), "the n decisions were pipelined")
	})

	t.Run("direct", func(t *testing.T) {
		// nothing in flight: the caller sends its decision itself, as
		// without pipelining
		p := policy(t)
		proxy, st, l, key := cutClusterStore(t, cl, hot, p)
		cutCluster(t, cl, hot, proxy, st, p, key, 1, func() {})
		assert.Zero(t, l.batched.Load(), "the decision was sent directly")
	})
}

// cutClusterStore returns a pipelining store over a new client of cl
// that reaches hot through a new swallowProxy and retries (MaxRetries 5,
// MaxRedirects 8), hot's lane, which the store made deciding on another
// of p's keys there, and a key of p on hot no decision touched. A new client per cut: none of its
// pooled connections was cut before.
func cutClusterStore(t *testing.T, cl *redistest.Cluster, hot *redistest.Server, p *core.Policy) (*swallowProxy, *redisStore, *lane, string) {
	t.Helper()
	proxy := startSwallowProxy(t, hot.Addr)
	o := cl.ClusterOptions()
	o.MaxRetries = 5
	o.MaxRedirects = 8 // the Cluster pipeline's attempts after a network error
	o.ReadTimeout, o.WriteTimeout = 30*time.Second, 30*time.Second
	var dialer net.Dialer
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == hot.Addr {
			addr = proxy.addr()
		}
		return dialer.DialContext(ctx, network, addr)
	}
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = cc.Close() })
	st := newStore(t, cc, WithClientTime(), WithPipelining(Pipelining{}))
	require.NoError(t, st.Preload(context.Background(), p))
	keys := keysOn(t, st, cc, p, hot, 2)
	takeOne(t, st, keys[0], p)
	rk, err := st.Keys(p, keys[1])
	require.NoError(t, err)
	m, err := cc.MasterForKey(context.Background(), rk[0])
	require.NoError(t, err)
	v, ok := st.pipe.lanes.Load(m)
	require.True(t, ok, "no lane for %s", hot.Addr)
	return proxy, st, v.(*lane), keys[1]
}

// cutCluster makes n concurrent decisions on key (on hot, through
// proxy) with replies swallowed; release lets them go once they are
// under way. Once hot ran n scripts it cuts the connections, letting the
// replies of new ones pass, and checks that nothing was sent twice.
func cutCluster(t *testing.T, cl *redistest.Cluster, hot *redistest.Server, proxy *swallowProxy, st *redisStore, p *core.Policy, key string, n int, release func()) {
	t.Helper()
	runs := func() (onHot, all int64) {
		for _, srv := range cl.Nodes {
			r := scriptRuns(t, srv)
			all += r
			if srv == hot {
				onHot = r
			}
		}
		return onHot, all
	}
	hot0, all0 := runs()
	proxy.swallowing.Store(true)
	decs := make([]core.Decision, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// the deadline only ends a hang; the cut ends the calls
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			decs[i], errs[i] = st.Take(ctx, key, p, epoch, 1)
		})
	}
	release()
	// hot runs all n (their replies are dropped); then cut
	waitFor(t, func() bool { h, _ := runs(); return h-hot0 >= int64(n) }, "hot ran %d decisions", n)
	proxy.swallowing.Store(false)
	proxy.cut()
	wg.Wait()

	hotRan, allRan := runs()
	hotRan, allRan = hotRan-hot0, allRan-all0
	failed := 0
	counted := map[int64]int{} // the count each successful decision saw
	for i := range n {
		if errs[i] != nil {
			failed++
			assert.False(t, errors.Is(errs[i], context.DeadlineExceeded), "decision %d timed out instead of failing on the cut: %v", i, errs[i])
			assert.Equal(t, "connection", core.ClassifyError(errs[i]), "decision %d: %v", i, errs[i])
			continue
		}
		// hot ran all n before the cut: a later run is a decision sent again
		c := 1000 - decs[i].Remaining
		counted[c]++
		assert.True(t, c >= 1 && c <= int64(n) && counted[c] == 1, "decision %d succeeded as run %d (the cut came after run %d), or shares it", i, c, n)
	}
	assert.Equal(t, n, failed, "every decision fails on the cut")
	assert.Equal(t, int64(n), allRan, "script runs on all masters: one per decision")
	assert.Equal(t, allRan, hotRan, "script runs on other masters")

	// the state counts each run once: a store straight to the Cluster
	// sees 1000 - runs - 1 left after its own
	plain := newStore(t, cl.NewClient(t), WithClientTime())
	assert.Equal(t, 1000-hotRan-1, takeOne(t, plain, key, p).Remaining, "remaining after %d script runs and one more", hotRan)
}
