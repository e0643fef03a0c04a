package redisstore

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWithPipeliningBounds: each field is accepted from 0 to its bound
// and refused, when the store is built, below 0 or above it (1<<62
// once panicked in a sender's buffers with the lane's mutex held), with
// a message naming the field and its range.
func TestWithPipeliningBounds(t *testing.T) {
	c := unreachableClient(t)
	for _, f := range []struct {
		name string
		max  int
		set  func(*Pipelining, int)
	}{
		{"MaxBatch", 65536, func(p *Pipelining, v int) { p.MaxBatch = v }},
		{"MaxQueue", 16777216, func(p *Pipelining, v int) { p.MaxQueue = v }},
		{"Senders", 64, func(p *Pipelining, v int) { p.Senders = v }},
	} {
		for _, v := range []int{0, 1, f.max} {
			var cfg Pipelining
			f.set(&cfg, v)
			_, err := newRedis(c, WithPipelining(cfg))
			assert.NoError(t, err, "%s %d", f.name, v)
		}
		for _, v := range []int{-1, f.max + 1, 1 << 62} {
			var cfg Pipelining
			f.set(&cfg, v)
			_, err := newRedis(c, WithPipelining(cfg))
			if assert.Error(t, err, "%s %d", f.name, v) {
				assert.Contains(t, err.Error(), fmt.Sprintf("%s is %d; it must be between 0 (the default) and %d", f.name, v, f.max))
			}
		}
	}
}

// TestPipeliningBuffersGrow: a sender's buffers grow with the batches it
// sends: with MaxBatch at its bound, a batch of three leaves them three
// long, not 65,536.
func TestPipeliningBuffersGrow(t *testing.T) {
	const n = 3
	st, _, _ := nodeStore(t, WithPipelining(Pipelining{MaxBatch: 65536, Senders: 1}))
	st.pipe.idle = time.Hour // the sender is still there when the test looks
	p := mustPolicy(t, core.Policy{Name: "grow", Limits: []core.Limit{core.Per(100, time.Hour)}})
	l := warmLane(t, st, p)
	takeTogether(t, st, l, p, n)
	require.Equal(t, int64(n), l.batched.Load(), "one pipeline of %d", n)
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.senders, 1)
	s := l.senders[0]
	assert.Equal(t, n, cap(s.cmds), "cmds")
	assert.Equal(t, n, cap(s.cmders), "cmders")
	assert.Zero(t, cap(s.again), "again: nothing was sent again")
}

// TestLaneTakeSkipsEnded: take sends neither a queued call whose
// deadline passed (answered context.DeadlineExceeded, as sweep does) nor
// one whose context ended (left abandoned, unanswered: its caller
// returns the context's error), and takes the others in order.
func TestLaneTakeSkipsEnded(t *testing.T) {
	l := defaultLane(t)
	now := time.Now()
	mk := func(dl time.Time, quit chan struct{}) *call {
		c := &call{done: make(chan struct{}, 1), dl: dl, quit: quit}
		c.state.Store(callQueued)
		return c
	}
	ended := make(chan struct{})
	close(ended)
	past, cancelled := mk(now.Add(-time.Millisecond), nil), mk(now.Add(time.Hour), ended)
	later, none, open := mk(now.Add(time.Hour), nil), mk(time.Time{}, nil), mk(time.Time{}, make(chan struct{}))
	l.q = []*call{past, later, cancelled, none, open}
	s := &sender{}
	l.mu.Lock()
	l.take(s, time.Now())
	l.mu.Unlock()
	assert.Equal(t, []*call{later, none, open}, s.live, "the calls sent")
	assert.Equal(t, 3, s.open, "the pipeline's calls not answered yet")
	assert.False(t, s.sentAt.IsZero(), "when the pipeline was taken")
	assert.Empty(t, l.q)
	select {
	case <-past.done:
		assert.ErrorIs(t, past.err, context.DeadlineExceeded)
		assert.Equal(t, callExpired, past.state.Load())
	default:
		t.Error("the call past its deadline was not answered")
	}
	assert.Equal(t, callAbandoned, cancelled.state.Load(), "the call whose context ended")
	assert.Empty(t, cancelled.done, "the call whose context ended was answered")
	for _, c := range s.live {
		assert.Equal(t, callTaken, c.state.Load())
	}
}

// TestPipeliningInFlightDeadline: one pipeline holds A (deadline two
// minutes away) and B (TakeBy's deadline, no context of its own); the
// node freezes before it answers. B returns context.DeadlineExceeded by
// its own deadline while A, batched with it, still waits; once the node
// resumes A succeeds and the key counts both (B ran: it had been sent).
func TestPipeliningInFlightDeadline(t *testing.T) {
	srv := redistest.StartNode(t)
	st := newStore(t, patientClient(t, srv), WithClientTime(), WithPipelining(Pipelining{Senders: 1}))
	p := mustPolicy(t, core.Policy{Name: "ifd", Limits: []core.Limit{core.Per(100, time.Hour)}})
	l := warmLane(t, st, p)
	hold(l)
	a := queueOne(t, l, 1, "A", func() error {
		_, err := st.TakeBy(context.Background(), time.Now().Add(2*time.Minute), "k", p, epoch, 1)
		return err
	})
	b := queueOne(t, l, 2, "B", func() error {
		_, err := st.TakeBy(context.Background(), time.Now().Add(10*time.Second), "k", p, epoch, 1)
		return err
	})
	srv.Pause()
	release(l)
	// both go in one pipeline (unless B's 10 s passed before a sender
	// took it: then B returns and the test cannot tell)
	waitFor(t, func() bool { return l.batched.Load() == 2 || len(b) > 0 }, "A and B sent")
	require.Equal(t, int64(2), l.batched.Load(), "B expired before it was sent: the machine is too slow for this test")
	select {
	case err := <-b:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case err := <-a:
		t.Fatalf("A returned (%v) before B, whose deadline is 110 s earlier", err)
	case <-time.After(time.Minute):
		t.Fatal("B, in a pipeline on a frozen node, did not return by its deadline")
	}
	assert.Empty(t, a, "A returned with B")
	srv.Resume()
	require.NoError(t, <-a)
	assert.Equal(t, int64(100-3), takeOne(t, st, "k", p).Remaining, "A and B ran once each")
}

// TestPipeliningSendersExit: with the idle time shortened, every sender
// a burst of pipelined decisions started exits once the store is idle,
// and the next burst starts them again.
func TestPipeliningSendersExit(t *testing.T) {
	st, _, _ := nodeStore(t, WithPipelining(Pipelining{}))
	st.pipe.idle = 20 * time.Millisecond
	p := mustPolicy(t, core.Policy{Name: "idle", Limits: []core.Limit{core.Per(1e6, time.Hour)}})
	l := warmLane(t, st, p)
	senders := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.senders)
	}
	for round := range 2 {
		batched0 := l.batched.Load()
		// queue behind a held lane, so that a sender starts
		takeTogether(t, st, l, p, 16)
		// a sender ran them
		assert.Equal(t, int64(16), l.batched.Load()-batched0, "round %d: pipelined", round)
		waitFor(t, func() bool { return senders() == 0 }, "round %d: senders exit when idle", round)
	}
}

// TestPipeliningLimiterExact: exactness through core.Limiter, whose
// per-call deadline reaches the store as TakeBy's (the production path):
// two pipelined stores, three policies each (one Limiter per store and
// policy, on one hot key), 96 goroutines; each policy admits exactly its
// limit in total, with one script run per decision.
func TestPipeliningLimiterExact(t *testing.T) {
	srv := redistest.StartNode(t)
	limits := []int64{100, 200, 300}
	type lim struct {
		l *core.Limiter
		i int // the index of its policy
	}
	var ls []lim
	var stores []*redisStore
	for range 2 {
		st := newStore(t, srv.NewClient(t), WithClientTime(), WithPipelining(Pipelining{}))
		stores = append(stores, st)
		for i, n := range limits {
			l, err := core.NewLimiter(st, core.Policy{Name: "lim" + strconv.Itoa(i), Limits: []core.Limit{core.Per(n, time.Hour)}},
				core.WithClock(core.NewManualClock(epoch)), core.WithTimeout(redistest.StoreTimeout))
			require.NoError(t, err)
			ls = append(ls, lim{l, i})
		}
	}
	const goroutines, perG = 96, 10
	runs0 := scriptRuns(t, srv)
	var admitted [3]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := ls[g%len(ls)]
			for range perG {
				d, err := l.l.Allow(context.Background(), "hot")
				if !assert.NoError(t, err) {
					return
				}
				if d.Allowed {
					admitted[l.i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for i, n := range limits {
		assert.Equal(t, n, admitted[i].Load(), "policy %d", i)
	}
	assert.Equal(t, int64(goroutines*perG), scriptRuns(t, srv)-runs0, "script runs")
	assert.Positive(t, batched(stores[0])+batched(stores[1]), "pipelined")
}

// errorCount is the count of err replies server gave, from INFO
// errorstats.
func errorCount(t *testing.T, srv *redistest.Server, err string) int64 {
	t.Helper()
	info, e := srv.Do("INFO", "errorstats")
	require.NoError(t, e)
	m := regexp.MustCompile(`errorstat_` + err + `:count=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestPipeliningNoScriptMidTraffic: 64 goroutines decide on one key,
// pipelined, while the script cache is flushed again and again (at least
// 20 times before the last of them stops): the count is exact and each
// decision ran its script once.
func TestPipeliningNoScriptMidTraffic(t *testing.T) {
	const goroutines, perG, flushes, limit = 64, 20, 20, 1000
	st, _, srv := nodeStore(t, WithPipelining(Pipelining{}))
	p := mustPolicy(t, core.Policy{Name: "nsm", Limits: []core.Limit{core.Per(limit, time.Hour)}})
	runs0, noscript0 := scriptRuns(t, srv), errorCount(t, srv, "NOSCRIPT")
	var flushed atomic.Int64
	var stop atomic.Bool
	flusherDone := make(chan error, 1)
	go func() {
		for !stop.Load() {
			if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
				flusherDone <- err
				return
			}
			flushed.Add(1)
			time.Sleep(time.Millisecond) // pacing, not synchronisation
		}
		flusherDone <- nil
	}()
	var decided, admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			// every flush up to the 20th comes while this one decides
			for i := 0; i < perG || flushed.Load() < flushes; i++ {
				d, err := st.Take(context.Background(), "k", p, epoch, 1)
				if !assert.NoError(t, err) {
					return
				}
				decided.Add(1)
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	require.NoError(t, <-flusherDone)
	n := decided.Load()
	assert.Equal(t, min(limit, n), admitted.Load(), "admitted of %d", n)
	assert.Equal(t, n, scriptRuns(t, srv)-runs0, "script runs")
	assert.Positive(t, batched(st), "pipelined")
	t.Logf("%d decisions, %d pipelined, %d flushes, %d NOSCRIPT replies", n, batched(st), flushed.Load(), errorCount(t, srv, "NOSCRIPT")-noscript0)
}

// slotMigration moves a key's slot on a Cluster from its master (src)
// to another (dst).
type slotMigration struct {
	t                  *testing.T
	cl                 *redistest.Cluster
	src, dst           *redistest.Server
	slot, srcID, dstID string
}

// newSlotMigration prepares the migration of key's slot.
func newSlotMigration(t *testing.T, cl *redistest.Cluster, cc *redis.ClusterClient, key string) *slotMigration {
	t.Helper()
	m := &slotMigration{t: t, cl: cl}
	node, err := cc.MasterForKey(context.Background(), key)
	require.NoError(t, err)
	for _, n := range cl.Nodes {
		if n.Addr == node.Options().Addr {
			m.src = n
		}
	}
	require.NotNil(t, m.src, "no node at %s", node.Options().Addr)
	m.dst = cl.Nodes[0]
	if m.dst == m.src {
		m.dst = cl.Nodes[1]
	}
	m.slot = m.do(m.src, "CLUSTER", "KEYSLOT", key)
	m.srcID = m.do(m.src, "CLUSTER", "MYID")
	m.dstID = m.do(m.dst, "CLUSTER", "MYID")
	return m
}

func (m *slotMigration) do(n *redistest.Server, args ...string) string {
	m.t.Helper()
	r, err := n.Do(args...)
	require.NoError(m.t, err, "%v", args)
	return r
}

// start marks the slot importing on dst and migrating on src.
func (m *slotMigration) start() {
	m.t.Helper()
	m.do(m.dst, "CLUSTER", "SETSLOT", m.slot, "IMPORTING", m.srcID)
	m.do(m.src, "CLUSTER", "SETSLOT", m.slot, "MIGRATING", m.dstID)
}

// move moves key to dst (src then answers ASK for it); it may run on
// any goroutine.
func (m *slotMigration) move(key string) error {
	host, port, _ := net.SplitHostPort(m.dst.Addr)
	_, err := m.src.Do("MIGRATE", host, port, "", "0", "5000", "KEYS", key)
	return err
}

// finish assigns the slot to dst on every master (src then answers
// MOVED).
func (m *slotMigration) finish() {
	m.t.Helper()
	for _, n := range m.cl.Nodes {
		m.do(n, "CLUSTER", "SETSLOT", m.slot, "NODE", m.dstID)
	}
}

// TestPipeliningSlotMigration: 64 goroutines decide on one key,
// pipelined, in four rounds: before its slot migrates, while it is
// marked migrating, once the key moved (the old master answers ASK) and
// once the slot moved (MOVED). Every decision succeeds, the masters ran
// one script per decision, and exactly limit-1 (the first decision took
// one) are admitted, the limit running out in the last round.
func TestPipeliningSlotMigration(t *testing.T) {
	const goroutines, perG, limit = 64, 8, 1800
	cl := redistest.StartCluster(t)
	cc := cl.NewClient(t)
	st := newStore(t, cc, WithClientTime(), WithPipelining(Pipelining{}))
	p := mustPolicy(t, core.Policy{Name: "reshard", Limits: []core.Limit{core.Per(limit, time.Hour)}})
	takeOne(t, st, "k", p)
	keys, err := st.Keys(p, "k")
	require.NoError(t, err)
	m := newSlotMigration(t, cl, cc, keys[0])
	runs0, ask0, moved0 := scriptRunsAll(t, cl.Nodes), errorCount(t, m.src, "ASK"), errorCount(t, m.src, "MOVED")
	var admitted atomic.Int64
	round := func(name string) {
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range perG {
					d, err := st.Take(context.Background(), "k", p, epoch, 1)
					if !assert.NoError(t, err, name) {
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
	}
	round("before")
	m.start()
	round("migrating")
	require.NoError(t, m.move(keys[0]))
	round("moved key")
	assert.Positive(t, errorCount(t, m.src, "ASK")-ask0, "src answered ASK")
	m.finish()
	round("moved slot")
	assert.Positive(t, errorCount(t, m.src, "MOVED")-moved0, "src answered MOVED")
	assert.Equal(t, int64(4*goroutines*perG), scriptRunsAll(t, cl.Nodes)-runs0, "script runs, one per decision")
	assert.Equal(t, int64(limit-1), admitted.Load(), "admitted")
	assert.Positive(t, batched(st), "pipelined")
}

// TestPipeliningRing: a Ring gets one queue for all its shards (the
// store's single lane, no per-node lanes), and pipelined decisions over
// it are exact, each shard running the scripts of its keys.
func TestPipeliningRing(t *testing.T) {
	a, b := redistest.StartNode(t), redistest.StartNode(t)
	var clients []redis.UniversalClient
	for range 3 {
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = ring.Close() })
		clients = append(clients, ring)
	}
	exactUnderPipelining(t, clients, []*redistest.Server{a, b})
	assert.Positive(t, scriptRuns(t, a), "scripts on shard a")
	assert.Positive(t, scriptRuns(t, b), "scripts on shard b")

	st := newStore(t, clients[0], WithClientTime(), WithPipelining(Pipelining{}))
	p := mustPolicy(t, core.Policy{Name: "ring1", Limits: []core.Limit{core.Per(10, time.Hour)}})
	for i := range 8 {
		takeOne(t, st, "k"+strconv.Itoa(i), p)
	}
	assert.NotNil(t, st.pipe.single.Load(), "the Ring's one lane")
	st.pipe.lanes.Range(func(k, _ any) bool { t.Errorf("a lane per node: %v", k); return true })
}
