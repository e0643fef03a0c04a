package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
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

// pipelineCases are one single-limit and one two-limit policy of every
// algorithm, hard.
func pipelineCases() []core.Policy {
	var ps []core.Policy
	for _, a := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		buckets := 0
		if a == core.SlidingWindowCounter {
			buckets = 10
		}
		ps = append(ps,
			core.Policy{Name: fmt.Sprintf("p1-%d", a), Algorithm: a, Buckets: buckets, Limits: []core.Limit{core.Per(40, time.Hour)}},
			core.Policy{Name: fmt.Sprintf("p2-%d", a), Algorithm: a, Buckets: buckets, Limits: []core.Limit{core.Per(40, time.Hour), core.Per(25, time.Minute)}})
	}
	return ps
}

// scriptRuns is the number of script calls server ran to completion
// (EVALSHA and EVAL calls less failed ones: NOSCRIPT replies), from INFO
// commandstats.
func scriptRuns(t testing.TB, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	require.NoError(t, err)
	var n int64
	re := regexp.MustCompile(`cmdstat_(evalsha|eval):calls=(\d+),.*failed_calls=(\d+)`)
	for _, m := range re.FindAllStringSubmatch(info, -1) {
		calls, _ := strconv.ParseInt(m[2], 10, 64)
		failed, _ := strconv.ParseInt(m[3], 10, 64)
		n += calls - failed
	}
	return n
}

// scriptRunsAll is scriptRuns summed over servers.
func scriptRunsAll(t testing.TB, servers []*redistest.Server) int64 {
	t.Helper()
	var n int64
	for _, srv := range servers {
		n += scriptRuns(t, srv)
	}
	return n
}

// batched is the number of decisions s sent in pipelines.
func batched(s *redisStore) int64 {
	var n int64
	if l := s.pipe.single.Load(); l != nil {
		n += l.batched.Load()
	}
	s.pipe.lanes.Range(func(_, v any) bool { n += v.(*lane).batched.Load(); return true })
	return n
}

// exactUnderPipelining makes 64 goroutines over three pipelined stores
// (one client each) take 1 from 4 keys at one frozen instant, for each
// case policy, and checks that exactly what core's Decide admits in
// sequence was admitted, with one script call per decision.
func exactUnderPipelining(t *testing.T, clients []redis.UniversalClient, servers []*redistest.Server) {
	const goroutines, perG, keys = 64, 8, 4
	var stores []*redisStore
	for _, c := range clients {
		stores = append(stores, newStore(t, c, WithClientTime(), WithPipelining(Pipelining{})))
	}
	for _, pol := range pipelineCases() {
		p := mustPolicy(t, pol)
		for _, st := range stores {
			require.NoError(t, st.Preload(context.Background(), p))
		}
		r := newRef(p)
		want := 0
		for i := range goroutines * perG {
			if r.take("k"+strconv.Itoa(i%keys), epoch, 1).Allowed {
				want++
			}
		}
		runs0 := scriptRunsAll(t, servers)
		var admitted, failed atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				st := stores[g%len(stores)]
				for i := range perG {
					d, err := st.Take(context.Background(), "k"+strconv.Itoa((g*perG+i)%keys), p, epoch, 1)
					if err != nil {
						failed.Add(1)
						continue
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		runs := scriptRunsAll(t, servers) - runs0
		require.Zero(t, failed.Load(), "%s", p.Name)
		assert.Equal(t, int64(want), admitted.Load(), "%s: admitted", p.Name)
		assert.Equal(t, int64(goroutines*perG), runs, "%s: script runs, one per decision", p.Name)
	}
	var n int64
	for _, st := range stores {
		n += batched(st)
	}
	t.Logf("%d of %d decisions went in pipelines", n, int64(len(pipelineCases())*goroutines*perG))
	assert.Positive(t, n, "no decision was pipelined")
}

func TestPipeliningExactNode(t *testing.T) {
	srv := redistest.StartNode(t)
	var clients []redis.UniversalClient
	for range 3 {
		o := srv.ClientOptions()
		o.PoolSize = 8
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	exactUnderPipelining(t, clients, []*redistest.Server{srv})
}

func TestPipeliningExactCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	var clients []redis.UniversalClient
	for range 3 {
		clients = append(clients, cl.NewClient(t))
	}
	exactUnderPipelining(t, clients, cl.Nodes)
}

// swallowProxy forwards TCP connections to a Redis server. While
// swallowing, it forwards every request but drops the server's replies on
// each connection from the first script call sent on it (so a new
// connection's handshake still completes); cut then closes every
// connection: the server ran the commands, the client never hears of
// them.
type swallowProxy struct {
	*tcpProxy
	swallowing atomic.Bool
}

func startSwallowProxy(t *testing.T, target string) *swallowProxy {
	p := &swallowProxy{}
	p.tcpProxy = startTCPProxy(t, target, func(c, s net.Conn) {
		var scripted atomic.Bool
		go func() {
			buf := make([]byte, 64<<10)
			var tail []byte
			for {
				n, err := c.Read(buf)
				if n > 0 {
					seen := append(tail, buf[:n]...)
					if p.swallowing.Load() && bytes.Contains(bytes.ToLower(seen), []byte("evalsha")) {
						scripted.Store(true)
					}
					tail = append(tail[:0], seen[max(0, len(seen)-8):]...)
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					_ = s.Close()
					return
				}
			}
		}()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && !scripted.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					_ = c.Close()
					return
				}
			}
		}()
	})
	return p
}

func (p *swallowProxy) cut() { p.closeAll() }

// TestPipeliningNeverSendsTwice: one pipeline of 32 decisions whose
// replies are lost when the connection is cut after the server ran them
// all: every caller gets an error and the server ran each exactly once
// (the key's state counts 32), although the client's options allow 5
// retries.
func TestPipeliningNeverSendsTwice(t *testing.T) {
	const n = 32
	srv := redistest.StartNode(t)
	proxy := startSwallowProxy(t, srv.Addr)
	o := srv.ClientOptions()
	o.Addr = proxy.addr()
	o.MaxRetries = 5 // go-redis would retry a plain command 5 times
	o.ReadTimeout, o.WriteTimeout = 30*time.Second, 30*time.Second
	client := redis.NewClient(o)
	t.Cleanup(func() { _ = client.Close() })
	st := newStore(t, client, WithClientTime(), WithPipelining(Pipelining{}))
	p := mustPolicy(t, core.Policy{Name: "cut", Limits: []core.Limit{core.Per(1000, time.Hour)}})
	require.NoError(t, st.Preload(context.Background(), p))
	l := warmLane(t, st, p)

	// queue all n before a sender runs, so that they go in one pipeline:
	// while the lane looks busy (a send in flight, every sender alive)
	// callers only queue
	hold(l)
	runs0 := scriptRuns(t, srv)
	proxy.swallowing.Store(true)
	errs := make([]error, n)
	wait := queueN(t, l, n, func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, errs[i] = st.Take(ctx, "victim", p, epoch, 1)
	})
	release(l)
	// the server runs all n (their replies are dropped); then cut
	waitFor(t, func() bool { return scriptRuns(t, srv)-runs0 >= n }, "the server ran %d decisions", n)
	proxy.cut()
	wait()
	for i, err := range errs {
		require.Error(t, err, "decision %d", i)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "decision %d timed out instead of failing on the cut: %v", i, err)
	}
	assert.Equal(t, "connection", core.ClassifyError(errs[0]), "%v", errs[0])
	assert.Equal(t, int64(n), scriptRuns(t, srv)-runs0, "script runs")
	assert.Equal(t, int64(n), l.batched.Load(), "the n decisions went in one pipeline")

	// the state counts each decision once: a fresh store straight to the
	// server sees 1000 - n - 1 left after its own
	direct := newStore(t, srv.NewClient(t), WithClientTime())
	assert.Equal(t, int64(1000-n-1), takeOne(t, direct, "victim", p).Remaining, "remaining after %d cut decisions and one more", n)
}

// TestPipeliningContextWhileQueued: with the node frozen, one decision is
// sent directly and one in a pipeline (Senders 1), so a third queues; its
// context ends: it returns the context's error at once and is never sent
// (after the node resumes, the key counts two).
func TestPipeliningContextWhileQueued(t *testing.T) {
	srv := redistest.StartNode(t)
	client := srv.NewClient(t)
	st := newStore(t, client, WithClientTime(), WithPipelining(Pipelining{Senders: 1}))
	p := mustPolicy(t, core.Policy{Name: "q", Limits: []core.Limit{core.Per(100, time.Hour)}})
	require.NoError(t, st.Preload(context.Background(), p))
	l := warmLane(t, st, p)

	wait := freezeTwoInFlight(t, srv, l, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := st.Take(ctx, "k", p, epoch, 1)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	third := queueOne(t, l, 1, "the third decision", func() error {
		_, err := st.Take(ctx, "k", p, epoch, 1)
		return err
	})
	cancel()
	select {
	case err := <-third:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled queued decision did not return")
	}
	srv.Resume()
	wait()
	waitFor(t, func() bool { return l.inflight.Load() == 0 && queued(l) == 0 }, "the queue to drain")
	assert.Equal(t, int64(100-3), takeOne(t, st, "k", p).Remaining, "the cancelled decision was sent: remaining counts it")
}

// TestPipeliningNoScript: after SCRIPT FLUSH, concurrent pipelined
// decisions get NOSCRIPT and only those are sent again (as EVAL): every
// decision runs once, and the count is exact.
func TestPipeliningNoScript(t *testing.T) {
	srv := redistest.StartNode(t)
	client := srv.NewClient(t)
	st := newStore(t, client, WithClientTime(), WithPipelining(Pipelining{}))
	p := mustPolicy(t, core.Policy{Name: "ns", Limits: []core.Limit{core.Per(100, time.Hour)}})
	const goroutines, perG = 32, 4
	for round := range 2 {
		_, err := srv.Do("SCRIPT", "FLUSH")
		require.NoError(t, err)
		runs0 := scriptRuns(t, srv)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range perG {
					d, err := st.Take(context.Background(), "k", p, epoch, 1)
					if assert.NoError(t, err) && d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int64(min(100-round*100, goroutines*perG)), admitted.Load(), "round %d", round)
		assert.Equal(t, int64(goroutines*perG), scriptRuns(t, srv)-runs0, "round %d: script runs", round)
	}
	assert.Positive(t, batched(st))
}

// TestPipeliningNoScriptMixed: one pipeline holds the decisions of two
// policies, alternately, one whose script Redis has and one whose script
// it never saw. Only the NOSCRIPT ones go out again (as EVAL): every
// caller gets its own policy's reply, each script ran once per decision,
// and both keys count exactly.
func TestPipeliningNoScriptMixed(t *testing.T) {
	const n = 12 // decisions per policy
	srv := redistest.StartNode(t)
	client := srv.NewClient(t)
	st := newStore(t, client, WithClientTime(), WithPipelining(Pipelining{}))
	known := mustPolicy(t, core.Policy{Name: "known", Limits: []core.Limit{core.Per(100, time.Hour)}})
	fresh := mustPolicy(t, core.Policy{Name: "fresh", Limits: []core.Limit{core.Per(1987, 97*time.Minute)}})
	// known's script reaches Redis with this first decision (sent
	// directly: EVALSHA, NOSCRIPT, EVAL); fresh's never did
	l := warmLane(t, st, known)
	c, err := st.policy(fresh)
	require.NoError(t, err)
	exists, err := client.ScriptExists(context.Background(), c.script.shaArg.(string)).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false}, exists, "the fresh policy's script is not in Redis yet")

	// the lane looks busy (a send in flight, every sender alive), so the
	// decisions queue, one after the other: known, fresh, known, ...
	hold(l)
	runs0 := scriptRuns(t, srv)
	decs := make([]core.Decision, 2*n)
	done := make([]<-chan error, 2*n)
	for i := range 2 * n {
		p := known
		if i%2 == 1 {
			p = fresh
		}
		done[i] = queueOne(t, l, i+1, fmt.Sprintf("decision %d", i), func() (err error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			decs[i], err = st.Take(ctx, "k", p, epoch, 1)
			return err
		})
	}
	release(l)
	errs := make([]error, 2*n)
	for i := range done {
		errs[i] = <-done[i]
	}
	for i := range 2 * n {
		require.NoError(t, errs[i], "decision %d", i)
		want := "known"
		if i%2 == 1 {
			want = "fresh"
		}
		assert.Equal(t, want, decs[i].Policy, "decision %d got another's reply", i)
		assert.True(t, decs[i].Allowed, "decision %d", i)
	}
	assert.Equal(t, int64(2*n), scriptRuns(t, srv)-runs0, "script runs")
	assert.Equal(t, int64(2*n), l.batched.Load(), "the decisions went in pipelines")

	direct := newStore(t, srv.NewClient(t), WithClientTime())
	assert.Equal(t, int64(100-n-1), takeOne(t, direct, "k", known).Remaining, "known: remaining after %d pipelined decisions and one more", n)
	assert.Equal(t, int64(1987-n-1), takeOne(t, direct, "k", fresh).Remaining, "fresh: remaining after %d pipelined decisions and one more", n)
}

func TestWithPipeliningRejectsNegative(t *testing.T) {
	c := unreachableClient(t)
	_, err := newRedis(c, WithPipelining(Pipelining{Senders: -1}))
	require.Error(t, err)
}

// TestPipeliningQueueBounded: with MaxQueue 1 and the lane busy, a second
// queued decision waits for room, and its context ends the wait: it
// returns the context's error and is never sent; the first is sent once
// the lane frees.
func TestPipeliningQueueBounded(t *testing.T) {
	srv := redistest.StartNode(t)
	st := newStore(t, srv.NewClient(t), WithClientTime(), WithPipelining(Pipelining{MaxQueue: 1}))
	p := mustPolicy(t, core.Policy{Name: "bounded", Limits: []core.Limit{core.Per(100, time.Hour)}})
	l := warmLane(t, st, p)
	// the lane looks busy: a send in flight and every sender alive
	hold(l)

	first := queueOne(t, l, 1, "the first decision", func() error {
		_, err := st.Take(context.Background(), "k", p, epoch, 1)
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := st.Take(ctx, "k", p, epoch, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the second decision waits for room within its context")
	assert.Equal(t, 1, queued(l), "the full queue took nothing more")

	release(l)
	require.NoError(t, <-first)
	assert.Equal(t, int64(100-2), takeOne(t, st, "k", p).Remaining, "the decision that found the queue full was sent: remaining counts it")
}

// TestPipeliningQueuedDeadline: with the node frozen, one decision is
// sent directly and one in a pipeline (Senders 1), both by a far
// deadline; a third, by a near deadline given as a time (TakeBy, as a
// Limiter gives it), queues behind them, next to a fourth queued first
// by a deadline 20 s away. The third returns context.DeadlineExceeded
// while the fourth is still queued, the lane's timer armed for it (a
// sweep 20 s late would have expired both at once), and neither is sent
// (after the node resumes, the key counts two).
func TestPipeliningQueuedDeadline(t *testing.T) {
	srv := redistest.StartNode(t)
	st := newStore(t, patientClient(t, srv), WithClientTime(), WithPipelining(Pipelining{Senders: 1}))
	p := mustPolicy(t, core.Policy{Name: "qd", Limits: []core.Limit{core.Per(100, time.Hour)}})
	require.NoError(t, st.Preload(context.Background(), p))
	l := warmLane(t, st, p)

	wait := freezeTwoInFlight(t, srv, l, func() error {
		_, err := st.TakeBy(context.Background(), time.Now().Add(time.Minute), "k", p, epoch, 1)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	far := time.Now().Add(20 * time.Second)
	fourth := queueOne(t, l, 1, "the fourth decision", func() error {
		_, err := st.TakeBy(ctx, far, "k", p, epoch, 1)
		return err
	})
	_, err := st.TakeBy(context.Background(), time.Now().Add(100*time.Millisecond), "k", p, epoch, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, queued(l), "the fourth decision expired with the third: the sweep came late")
	assert.Empty(t, fourth, "the fourth decision returned with the third")
	l.mu.Lock()
	armed := l.watchAt
	l.mu.Unlock()
	assert.Equal(t, far, armed, "the timer is armed for the fourth decision's deadline")
	cancel()
	require.ErrorIs(t, <-fourth, context.Canceled)
	srv.Resume()
	wait()
	assert.Equal(t, int64(100-3), takeOne(t, st, "k", p).Remaining, "an expired or cancelled queued decision was sent: remaining counts it")
}

// TestLaneSweep: sweep answers the calls whose deadline passed, queued
// or in a pipeline, with context.DeadlineExceeded, leaves the others,
// drops abandoned ones from the queue, and arms itself for the earliest
// deadline left.
func TestLaneSweep(t *testing.T) {
	l := defaultLane(t)
	now := time.Now()
	mk := func(state int32, dl time.Time) *call {
		c := &call{done: make(chan struct{}, 1), dl: dl}
		c.state.Store(state)
		return c
	}
	pastQ, laterQ := mk(callQueued, now.Add(-time.Second)), mk(callQueued, now.Add(time.Hour))
	noneQ, gone := mk(callQueued, time.Time{}), mk(callAbandoned, now.Add(-time.Second))
	pastF, laterF := mk(callTaken, now.Add(-time.Second)), mk(callTaken, now.Add(30*time.Minute))
	l.q = []*call{pastQ, gone, laterQ, noneQ}
	l.senders = []*sender{{live: []*call{pastF, laterF}, open: 2}}
	l.sweep()
	for name, c := range map[string]*call{"queued": pastQ, "in flight": pastF} {
		select {
		case <-c.done:
			assert.ErrorIs(t, c.err, context.DeadlineExceeded, name)
			assert.Equal(t, callExpired, c.state.Load(), name)
		default:
			t.Errorf("the %s call past its deadline was not answered", name)
		}
	}
	for name, c := range map[string]*call{"queued": laterQ, "queued without deadline": noneQ, "in flight": laterF} {
		assert.Empty(t, c.done, "the %s call before its deadline was answered", name)
	}
	assert.Equal(t, []*call{laterQ, noneQ}, l.q, "the queue keeps the live calls")
	assert.Equal(t, laterF.dl, l.watchAt, "armed for the earliest deadline left")
	assert.Equal(t, 1, l.senders[0].open, "the pipeline's calls sweep has not answered")
	l.watch.Stop()
}

// TestLaneFullBatches: while a pipeline of 3 is in flight, an idle
// sender leaves 1 and then 2 queued decisions waiting (it is not woken
// for them, and does not take them when it looks), and takes the queue
// once it holds 3, in one pipeline; with nothing in flight, or once the
// queue holds MaxBatch, it takes at once.
func TestLaneFullBatches(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	p := &pipeliner{cfg: Pipelining{MaxBatch: 4, MaxQueue: defaultMaxQueue, Senders: 2}, idle: senderIdle}
	mk := func(state int32) *call {
		c := &call{done: make(chan struct{}, 1), args: []any{"evalsha", "0", 0}}
		c.state.Store(state)
		return c
	}
	// a sender (without a goroutine) whose pipeline of n went out at
	// sent; a sentAt in the future keeps it from ever being stalled
	inFlight := func(n int, sent time.Time) *sender {
		o := &sender{open: n, sentAt: sent}
		for range n {
			o.live = append(o.live, mk(callTaken))
		}
		return o
	}
	never := time.Now().Add(time.Hour)
	ready := func(l *lane) bool { ok, _ := l.ready(time.Now()); return ok }
	// the rule, and enqueue's wake token for an idle sender (one that
	// looks idle, without a goroutine)
	l := p.newLane(c)
	l.idle = 1
	require.NoError(t, l.enqueue(context.Background(), mk(callQueued)))
	assert.True(t, ready(l), "nothing in flight: take one")
	assert.Len(t, l.wake, 1, "nothing in flight: the idle sender is woken for one")
	<-l.wake
	l.senders = []*sender{inFlight(6, never)}
	for i := 2; i <= 4; i++ {
		require.NoError(t, l.enqueue(context.Background(), mk(callQueued)))
		if i < 4 {
			assert.False(t, ready(l), "%d queued, 6 in flight", i)
			assert.Empty(t, l.wake, "the idle sender was woken for %d queued, 6 in flight", i)
		}
	}
	assert.True(t, ready(l), "MaxBatch (4) queued, 6 in flight")
	assert.Len(t, l.wake, 1, "the idle sender is woken for MaxBatch queued")
	full := &pipeliner{cfg: Pipelining{MaxBatch: 8, MaxQueue: 2, Senders: 3}}
	lf := full.newLane(c)
	lf.q = []*call{mk(callQueued), mk(callQueued)}
	lf.senders = l.senders
	assert.True(t, ready(lf), "a full queue (2), 6 in flight")

	// calls sweep answered, and a stalled pipeline, hold nothing back
	l = p.newLane(c)
	l.q = []*call{mk(callQueued)}
	now := time.Now()
	answered := inFlight(6, now)
	answered.open = 0
	l.senders = []*sender{answered}
	ok, _ := l.ready(now)
	assert.True(t, ok, "6 in flight, all answered by sweep")
	answered.open = 2
	ok, _ = l.ready(now)
	assert.False(t, ok, "1 queued, 2 of 6 in flight not answered")
	l.q = append(l.q, mk(callQueued))
	ok, _ = l.ready(now)
	assert.True(t, ok, "2 queued, 2 of 6 in flight not answered")
	l.senders = []*sender{inFlight(6, now.Add(-maxHold/2)), inFlight(3, now.Add(-maxHold/4))}
	ok, wait := l.ready(now)
	assert.False(t, ok, "9 in flight for less than maxHold")
	assert.Equal(t, maxHold/2, wait, "until the older pipeline is out for maxHold")
	ok, _ = l.ready(now.Add(maxHold / 2))
	assert.False(t, ok, "3 still in flight for less than maxHold")
	ok, _ = l.ready(now.Add(maxHold * 3 / 4))
	assert.True(t, ok, "both pipelines out for maxHold: stalled")

	// a sender goroutine, with another sender's pipeline of 3 in flight
	l = p.newLane(c)
	other := inFlight(3, never)
	l.senders = []*sender{other}
	idleWith := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			l.mu.Lock()
			idle, q := l.idle, len(l.q)
			l.mu.Unlock()
			if idle == 1 {
				require.Equal(t, n, q, "decisions left queued by the idle sender")
				return
			}
			require.True(t, time.Now().Before(deadline), "the sender did not go idle")
			time.Sleep(time.Millisecond)
		}
	}
	calls := []*call{mk(callQueued), mk(callQueued), mk(callQueued)}
	require.NoError(t, l.enqueue(context.Background(), calls[0])) // starts the sender
	idleWith(1)
	require.NoError(t, l.enqueue(context.Background(), calls[1]))
	idleWith(2)
	require.NoError(t, l.enqueue(context.Background(), calls[2]))
	for i, c := range calls {
		select {
		case <-c.done:
			assert.Error(t, c.err, "call %d: the node is unreachable", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d was not sent with 3 queued, 3 in flight", i)
		}
	}
	assert.Equal(t, int64(3), l.batched.Load(), "decisions sent in pipelines")
	l.mu.Lock()
	l.senders = slices.DeleteFunc(l.senders, func(s *sender) bool { return s == other })
	l.mu.Unlock()

	// a stalled pipeline: a sender goroutine, whose idle time outlasts the
	// test, sends a decision queued behind it once it is out for maxHold
	slow := &pipeliner{cfg: p.cfg, idle: 30 * time.Second}
	l = slow.newLane(c)
	stalled := inFlight(3, time.Now())
	l.senders = []*sender{stalled}
	late := mk(callQueued)
	require.NoError(t, l.enqueue(context.Background(), late))
	select {
	case <-late.done:
		assert.Error(t, late.err, "the node is unreachable")
	case <-time.After(10 * time.Second):
		t.Fatal("a decision queued behind a stalled pipeline was not sent")
	}
	assert.Equal(t, int64(1), l.batched.Load(), "decisions sent in pipelines")
}
