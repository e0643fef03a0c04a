package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pipelining configures [WithPipelining]. The zero value takes every
// default. Each field is between 0 (its default) and its bound; see
// [WithPipelining].
type Pipelining struct {
	// MaxBatch is the most decisions one pipeline carries (0: 128; at
	// most 65,536: at a few microseconds of Redis CPU per script, a batch
	// that big keeps Redis busy for a few hundred milliseconds, during
	// which every decision queued behind it waits).
	MaxBatch int
	// MaxQueue is the most decisions waiting for a pipeline per queue
	// (one per Redis node, one for a whole Ring; see [WithPipelining])
	// (0: 4096; at most 16,777,216: gigabytes of waiting decisions, a
	// minute's work for a node that serves a few hundred thousand a
	// second). A caller that finds the queue full waits for room within
	// its context.
	MaxQueue int
	// Senders is the most pipelines in flight at once per queue (0: 2;
	// at most 64: each holds a connection of the client's pool, and
	// Redis runs one script at a time, so more than a few in flight only
	// lengthen its input queue), each on its own connection: while Redis
	// runs one batch, the next is being gathered and sent.
	Senders int
}

// Defaults of Pipelining.
const (
	defaultMaxBatch = 128
	defaultMaxQueue = 4096
	defaultSenders  = 2
)

// Bounds of Pipelining's fields (see Pipelining).
const (
	maxMaxBatch = 1 << 16
	maxMaxQueue = 1 << 24
	maxSenders  = 64
)

// senderIdle is how long a sender goroutine with nothing to send waits
// before it exits; the next decision starts one again.
const senderIdle = time.Second

// WithPipelining makes the store send concurrent decisions bound for the
// same Redis node in shared pipelines: one write and one read for many
// EVALSHAs instead of a round trip each. It serves Take and
// TakeElastic; the other verbs and TakeBatch (already one
// pipeline per node) are unchanged. Each decision is still one script
// call, atomic on its own, so decisions are exact under concurrency as
// without pipelining, for every algorithm and multi-limit policy.
//
// How it sends: a decision that finds nothing in flight to its node is
// sent at once by its caller, exactly as without the option (a lone
// caller waits for nothing). Otherwise it joins the node's queue (at
// most MaxQueue), and up to Senders goroutines per queue drain it, at
// most MaxBatch decisions per pipeline. A Cluster's masters each have
// their own queue, chosen by the key's slot. Any other client has one
// queue: a Ring too, for all its shards (go-redis's Ring pipeline splits
// each batch by shard and returns when every shard answered, so a slow
// shard delays the other shards' decisions batched with its own, and
// MaxQueue and Senders bound the Ring as a whole). A free sender takes
// the queue at once when no pipeline is in flight; while some are, once
// it holds as many decisions as they still wait for (or MaxBatch, or
// MaxQueue), at the latest when they came back or have been out for 2 ms
// (far longer than a round trip and a batch take: a stalled connection,
// waiting for its read timeout, holds no decision back). Redis runs the pipelines one after the
// other, so the next one goes out while the one before runs, whole
// rather than as the few decisions queued first (pipelines of one or two
// cost Redis a read and a write each, and left it idle between them). No
// timer, no window.
//
// The caller's context bounds the wait: a decision whose context ends
// before a sender takes it from the queue returns the context's error
// and is never sent (a sender checks each call's context as it takes
// it); one whose context ends after that returns the error at once, and
// Redis may have counted it, as after a timeout without pipelining. The
// deadline TakeBy is given (a core.Limiter's per-call deadline)
// bounds it alike without a context per decision: a decision whose
// deadline has passed when a sender would take it is answered with
// context.DeadlineExceeded and never sent, and one timer per queue,
// armed for the earliest deadline waiting, answers a decision whose
// deadline passed, queued (never sent) or in a pipeline, with
// context.DeadlineExceeded, however long the pipelines ahead of it wait
// for a hung Redis.
//
// No decision is ever sent twice. A pipeline that fails on the
// connection (reset, EOF, timeout) after it was written fails every
// decision in it, whatever go-redis's MaxRetries, and the Limiter applies
// each policy's fail mode: the scripts may have run. Only replies that
// say a script did not run are sent again: NOSCRIPT (Redis lost the
// script: those decisions alone go out again as EVAL), TRYAGAIN (a
// Cluster slot migration split a decision's keys; sent again by its
// caller as without pipelining), and MOVED/ASK (go-redis's Cluster
// pipeline follows the redirect for that command only).
//
// Trade-offs. Throughput: with many concurrent decisions per app server
// (tens and more), a node serves up to the rate its CPU allows (about
// 1/usec_per_call of the script in INFO commandstats) instead of the
// rate the round trips allow; see docs/redis-pipelining.md for figures.
// Latency: a decision that queues waits for the pipeline in flight before
// it; under load that is shorter than the queue of connections it
// replaces, but one slow script delays the decisions batched with it.
// Failure: a broken connection fails a whole batch, not one decision.
// Resources: the store then starts goroutines (Senders per queue at most,
// started on demand, ending after a second with nothing to send, and
// the deadline timer's sweep, run when the earliest deadline waiting
// comes), so it is no longer free of goroutines; a Store needs no Close
// either way.
// Pipelines hold up to Senders connections per queue of the client's pool.
//
// A field out of its range (negative, or above MaxBatch 65,536,
// MaxQueue 16,777,216, Senders 64) is an error, when the store is built.
func WithPipelining(cfg Pipelining) Option {
	return func(s *redisStore) error {
		for _, f := range []struct {
			name   string
			v, max int
		}{{"MaxBatch", cfg.MaxBatch, maxMaxBatch}, {"MaxQueue", cfg.MaxQueue, maxMaxQueue}, {"Senders", cfg.Senders, maxSenders}} {
			if f.v < 0 || f.v > f.max {
				return fmt.Errorf("redisstore: WithPipelining: %s is %d; it must be between 0 (the default) and %d", f.name, f.v, f.max)
			}
		}
		if cfg.MaxBatch == 0 {
			cfg.MaxBatch = defaultMaxBatch
		}
		if cfg.MaxQueue == 0 {
			cfg.MaxQueue = defaultMaxQueue
		}
		if cfg.Senders == 0 {
			cfg.Senders = defaultSenders
		}
		s.pipe = &pipeliner{cfg: cfg, idle: senderIdle}
		return nil
	}
}

// pipeliner batches a store's script calls per Redis node.
type pipeliner struct {
	cfg    Pipelining
	idle   time.Duration        // senderIdle (tests shorten it)
	single atomic.Pointer[lane] // the lane of a client that is not a Cluster
	lanes  sync.Map             // a Cluster's lanes: *redis.Client (master) → *lane
	mapped atomic.Bool          // a Cluster's slot map was loaded: finding a lane does no I/O
}

// lane is one Redis node's queue and its senders.
type lane struct {
	p        *pipeliner
	client   redis.UniversalClient
	inflight atomic.Int32  // script calls being sent: direct ones and pipelines
	batched  atomic.Int64  // decisions sent in pipelines (tests read it)
	wake     chan struct{} // a token for an idle sender (buffered 1)
	watch    *time.Timer   // runs sweep at watchAt

	mu      sync.Mutex
	q       []*call       // queued calls, oldest first, at most MaxQueue
	room    chan struct{} // closed when q has room again; nil while nobody waits for it
	senders []*sender     // the sender goroutines alive
	busy    int           // senders that look alive without a goroutine (tests)
	idle    int           // senders waiting for work
	watchAt time.Time     // when watch runs sweep; zero: not armed
}

// call states: a queued call is taken by a sender, abandoned by its
// caller, or expired by sweep, whichever comes first; a taken call is
// answered by its sender or expired by sweep.
const (
	callQueued int32 = iota
	callTaken
	callAbandoned
	callAnswered
	callExpired
)

// call is one decision in a lane's queue.
type call struct {
	dl    time.Time // the caller's deadline; zero: none
	sc    *script
	args  []any
	state atomic.Int32
	done  chan struct{} // receives once when vals and err are set (buffered 1)
	vals  []int64
	err   error
	argv  [10]any // args' array when they fit
	key   keyArg  // args' key on a node that is not a Cluster's

	quit <-chan struct{} // the caller's ctx.Done(); nil: none
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// take is s.Take's script call under c, batched (see do).
func (p *pipeliner) take(ctx context.Context, dl time.Time, s *redisStore, c *compiled, key string, now time.Time, cost int64) ([]int64, error) {
	cl := callPool.Get().(*call)
	var ka *keyArg
	if _, ok := s.client.(*redis.ClusterClient); !ok {
		ka = &cl.key // a Cluster's lane is found by the key's text
	}
	cl.args = s.appendArgs(cl.argv[:0], ka, c, c.tailAt(now), key, now, cost)
	return p.do(ctx, dl, s.client, c.script, cl)
}

// run runs sc with args as script.run does, batched (see do), by ctx's
// deadline.
func (p *pipeliner) run(ctx context.Context, client redis.UniversalClient, sc *script, args []any) ([]int64, error) {
	c := callPool.Get().(*call)
	c.args = args
	return p.do(ctx, time.Time{}, client, sc, c)
}

// do runs sc with c.args as script.run does, batched with the other
// decisions for the same node, by dl (zero: none) and ctx's deadline,
// whichever is earlier. A queued call's deadline is kept by its lane's
// sweep, without a context of its own. c comes from callPool, and goes
// back to it unless a pipeline may still hold it.
func (p *pipeliner) do(ctx context.Context, dl time.Time, client redis.UniversalClient, sc *script, c *call) ([]int64, error) {
	if d, ok := ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
		dl = d
	}
	l := p.lane(ctx, dl, client, c.args)
	// nothing in flight to the node (or no lane): send at once, as
	// without pipelining
	if l == nil || l.inflight.CompareAndSwap(0, 1) {
		vals, err := runBy(ctx, dl, client, sc, c.args)
		if l != nil {
			l.inflight.Add(-1)
		}
		c.recycle()
		return vals, err
	}
	if err := ctx.Err(); err != nil {
		c.recycle()
		return nil, err
	}
	c.dl, c.sc, c.quit = dl, sc, ctx.Done()
	c.state.Store(callQueued)
	if err := l.enqueue(ctx, c); err != nil {
		c.recycle()
		return nil, err
	}
	if done := ctx.Done(); done == nil {
		<-c.done
	} else {
		select {
		case <-c.done:
		case <-done:
			// queued: never sent, and dropped by the lane (c is not
			// reused: the queue holds it). Sent: the reply no longer
			// matters (Redis may have counted the decision, as after a
			// timeout without pipelining); c stays with its sender.
			c.state.CompareAndSwap(callQueued, callAbandoned)
			return nil, ctx.Err()
		}
	}
	vals, err := c.vals, c.err
	if err != nil && redis.HasErrorPrefix(err, "TRYAGAIN") {
		// the script did not run: the plain path waits and sends again
		vals, err = runBy(ctx, dl, client, sc, c.args)
	}
	if c.state.Load() == callAnswered {
		// its sender is done with it (an expired call may still be in
		// a pipeline: it is not reused)
		c.recycle()
	}
	return vals, err
}

// recycle clears c and puts it back in callPool.
func (c *call) recycle() {
	c.dl, c.sc, c.args, c.vals, c.err, c.quit = time.Time{}, nil, nil, nil, nil, nil
	clear(c.argv[:])
	callPool.Put(c)
}

// due reports whether c's deadline is at or before now.
func (c *call) due(now time.Time) bool {
	return !c.dl.IsZero() && !now.Before(c.dl)
}

// runBy is sc.run bounded by dl (zero: none) as well as by ctx.
func runBy(ctx context.Context, dl time.Time, client redis.UniversalClient, sc *script, args []any) ([]int64, error) {
	ctx, cancel := withDeadline(ctx, dl)
	defer cancel()
	return sc.run(ctx, client, args)
}

// withDeadline is ctx bounded by dl, ctx itself when dl is zero or not
// before ctx's own deadline.
func withDeadline(ctx context.Context, dl time.Time) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); dl.IsZero() || ok && !dl.Before(d) {
		return ctx, noCancel
	}
	return context.WithDeadline(ctx, dl)
}

func noCancel() {}

// lane returns the lane of the node that holds args' keys, nil when it
// cannot tell (a Cluster whose slot map is not loaded). Until a
// Cluster's slot map was loaded once, finding the node may load it,
// bounded by dl.
func (p *pipeliner) lane(ctx context.Context, dl time.Time, client redis.UniversalClient, args []any) *lane {
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		if l := p.single.Load(); l != nil {
			return l
		}
		p.single.CompareAndSwap(nil, p.newLane(client))
		return p.single.Load()
	}
	key, _ := args[3].(string)
	var node *redis.Client
	var err error
	if p.mapped.Load() {
		node, err = cc.MasterForKey(ctx, key)
	} else {
		lctx, cancel := withDeadline(ctx, dl)
		node, err = cc.MasterForKey(lctx, key)
		cancel()
		p.mapped.Store(err == nil)
	}
	if err != nil {
		return nil
	}
	if l, ok := p.lanes.Load(node); ok {
		return l.(*lane)
	}
	l, _ := p.lanes.LoadOrStore(node, p.newLane(client))
	return l.(*lane)
}

func (p *pipeliner) newLane(client redis.UniversalClient) *lane {
	l := &lane{p: p, client: client, wake: make(chan struct{}, 1)}
	l.watch = time.AfterFunc(time.Hour, l.sweep)
	l.watch.Stop()
	return l
}

// enqueue queues c, waiting for room within ctx and c's deadline when
// the queue is full, and gets a sender to it: an idle one, or a new one
// unless Senders are alive.
func (l *lane) enqueue(ctx context.Context, c *call) error {
	l.mu.Lock()
	for len(l.q) >= l.p.cfg.MaxQueue {
		if l.room == nil {
			l.room = make(chan struct{})
		}
		room := l.room
		l.mu.Unlock()
		if err := waitRoom(ctx, c.dl, room); err != nil {
			return err
		}
		l.mu.Lock()
	}
	l.q = append(l.q, c)
	l.arm(c.dl)
	if l.idle > 0 {
		if ok, _ := l.ready(time.Now()); ok {
			select {
			case l.wake <- struct{}{}:
			default: // a token is waiting already
			}
		}
	} else {
		l.spawn()
	}
	l.mu.Unlock()
	return nil
}

// waitRoom waits until room is closed, ctx is done or dl (zero: none)
// passes.
func waitRoom(ctx context.Context, dl time.Time, room chan struct{}) error {
	var expire <-chan time.Time
	if !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-room:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expire:
		return context.DeadlineExceeded
	}
}

// spawn starts a sender unless Senders are alive. l.mu is held.
func (l *lane) spawn() {
	if len(l.senders)+l.busy >= l.p.cfg.Senders {
		return
	}
	s := &sender{pipe: l.client.Pipeline()} // its buffers grow as batches do
	l.senders = append(l.senders, s)
	go l.send(s)
}

// arm makes sure sweep runs by dl (zero: none). l.mu is held.
func (l *lane) arm(dl time.Time) {
	if dl.IsZero() || !l.watchAt.IsZero() && !dl.Before(l.watchAt) {
		return
	}
	l.watchAt = dl
	l.watch.Reset(time.Until(dl))
}

// sweep answers every queued or in-flight call whose deadline passed
// with context.DeadlineExceeded (a queued one is never sent), drops the
// abandoned calls from the queue, and arms itself for the next
// deadline: the calls of a hung Redis return by their deadlines,
// however long the pipelines ahead of them are bounded for.
func (l *lane) sweep() {
	now := time.Now()
	var late []*call
	var next time.Time
	l.mu.Lock()
	keep := l.q[:0]
	for _, c := range l.q {
		if c.state.Load() != callQueued {
			continue // abandoned
		}
		if c.due(now) && c.state.CompareAndSwap(callQueued, callExpired) {
			late = append(late, c)
			continue
		}
		keep = append(keep, c)
		next = earliest(next, c.dl)
	}
	clear(l.q[len(keep):])
	l.q = keep
	for _, s := range l.senders {
		for _, c := range s.live {
			if c.due(now) && c.state.CompareAndSwap(callTaken, callExpired) {
				late = append(late, c)
				s.open--
			} else if c.state.Load() == callTaken {
				next = earliest(next, c.dl)
			}
		}
	}
	l.watchAt = time.Time{}
	l.arm(next)
	l.openRoom()
	l.mu.Unlock()
	for _, c := range late {
		c.err = context.DeadlineExceeded
		c.done <- struct{}{}
	}
}

// earliest is the earlier of two deadlines, zero being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// openRoom wakes the callers waiting for room in the queue, if it has
// some. l.mu is held.
func (l *lane) openRoom() {
	if l.room != nil && len(l.q) < l.p.cfg.MaxQueue {
		close(l.room)
		l.room = nil
	}
}

// sender is one sender goroutine's buffers, reused from pipeline to
// pipeline so that a batch allocates little beyond its commands.
type sender struct {
	live   []*call   // the calls in flight (sweep reads it under the lane's mu)
	open   int       // of live, the calls sweep has not answered (l.mu)
	sentAt time.Time // when live was taken (l.mu)
	spare  []*call   // an empty queue, swapped with the lane's when it takes it whole
	resend []*call   // the calls sent again as EVAL
	cmds   []onceCmd
	again  []onceCmd // resend's commands
	cmders []redis.Cmder
	pipe   redis.Pipeliner // reusable: Exec empties it
}

// send drains the queue in pipelines of at most MaxBatch until it has
// been empty for senderIdle.
func (l *lane) send(s *sender) {
	idle := time.NewTimer(l.p.idle)
	defer idle.Stop()
	l.mu.Lock()
	for {
		var hold time.Duration // the queue waits for a pipeline in flight this long at most
		for len(s.live) == 0 && len(l.q) > 0 {
			now := time.Now()
			ok, wait := l.ready(now)
			if !ok {
				hold = wait
				break
			}
			l.take(s, now)
		}
		if len(s.live) > 0 {
			l.mu.Unlock()
			l.flush(s)
			l.mu.Lock()
			continue
		}
		l.idle++
		l.mu.Unlock()
		if hold > 0 && hold < l.p.idle {
			idle.Reset(hold) // then take the queue: see ready
		} else {
			idle.Reset(l.p.idle)
		}
		expired := false
		select {
		case <-l.wake:
		case <-idle.C:
			expired = true
		}
		l.mu.Lock()
		l.idle--
		if expired && len(l.q) == 0 {
			l.senders = slices.DeleteFunc(l.senders, func(o *sender) bool { return o == s })
			l.mu.Unlock()
			return
		}
	}
}

// maxHold is how long a pipeline in flight holds the queue back (see
// ready): a round trip and a batch's scripts take far less (at 64
// goroutines on one node, about 0.3 ms), so a pipeline out longer is
// stalled (a dead connection waiting for its read timeout, a node paused)
// and free senders send what is queued on other connections, as they
// would without the rule.
const maxHold = 2 * time.Millisecond

// ready reports whether a free sender takes the queue at now: no
// pipeline is in flight, or the queue holds as many calls as the
// pipelines in flight for less than maxHold still wait for (MaxBatch at
// most; a full queue, whose callers wait for room, always is taken).
// Otherwise the queue waits to grow, for the sender of a pipeline in
// flight to be free (ready then: its calls were answered), or wait, when
// the oldest such pipeline is out for maxHold (then ask again). Calls
// sweep answered are not waited for. A direct send is not counted: it is
// one call. l.mu is held.
func (l *lane) ready(now time.Time) (ok bool, wait time.Duration) {
	n := 0
	for _, o := range l.senders {
		left := o.sentAt.Add(maxHold).Sub(now)
		if o.open == 0 || left <= 0 {
			continue
		}
		n += o.open
		if wait == 0 || left < wait {
			wait = left
		}
	}
	if len(l.q) >= min(n, l.p.cfg.MaxBatch, l.p.cfg.MaxQueue) {
		return true, 0
	}
	return false, wait
}

// take moves up to MaxBatch calls from the queue to s.live, the ones
// still queued whose context has not ended; it answers those whose
// deadline passed with context.DeadlineExceeded, as sweep does, and drops
// those whose context ended, now being the time it takes them at (the
// one ready was asked at). l.mu is held.
func (l *lane) take(s *sender, now time.Time) {
	n := min(len(l.q), l.p.cfg.MaxBatch)
	for _, c := range l.q[:n] {
		if c.due(now) {
			if c.state.CompareAndSwap(callQueued, callExpired) {
				c.err = context.DeadlineExceeded
				c.done <- struct{}{} // buffered: answered once
			}
			continue
		}
		select {
		case <-c.quit:
			c.state.CompareAndSwap(callQueued, callAbandoned)
			continue
		default:
		}
		if c.state.CompareAndSwap(callQueued, callTaken) {
			s.live = append(s.live, c)
		}
	}
	s.open, s.sentAt = len(s.live), now
	if n == len(l.q) {
		clear(l.q)
		l.q, s.spare = s.spare[:0], l.q[:0]
	} else {
		k := copy(l.q, l.q[n:])
		clear(l.q[k:])
		l.q = l.q[:k]
	}
	l.openRoom()
}

// flush sends s.live in one pipeline and hands each call its reply.
func (l *lane) flush(s *sender) {
	live := s.live
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	l.batched.Add(int64(len(live)))
	// the pipeline's context: the latest of its calls' deadlines (sweep
	// answers a call whose own passes sooner); none if one has none, and
	// then the client's read timeout bounds it
	var dl time.Time
	for _, c := range live {
		if c.dl.IsZero() {
			dl = time.Time{}
			break
		}
		if c.dl.After(dl) {
			dl = c.dl
		}
	}
	ctx, cancel := withDeadline(context.Background(), dl)
	defer cancel()
	cmds := grow(&s.cmds, len(live))
	l.exec(ctx, s, live, cmds)
	resend := s.resend[:0]
	for i, c := range live {
		if err := cmds[i].Err(); err != nil && isNoScript(err) && c.args[0] == "evalsha" {
			// the script did not run: EVAL sends it with its source
			c.args[0], c.args[1] = "eval", c.sc.srcArg
			resend = append(resend, c)
		}
	}
	again := grow(&s.again, len(resend))
	if len(resend) > 0 {
		l.exec(ctx, s, resend, again)
	}
	l.mu.Lock()
	s.live, s.open = live[:0], 0 // answered from here on: sweep leaves them
	l.mu.Unlock()
	j := 0
	for i, c := range live {
		cmd := cmds[i]
		if j < len(resend) && resend[j] == c {
			cmd = again[j]
			j++
		}
		if c.state.CompareAndSwap(callTaken, callAnswered) {
			c.vals, c.err = cmd.ints()
			c.done <- struct{}{}
		}
	}
	// no reply or call outlives its batch in the buffers
	clear(cmds)
	clear(again)
	clear(live)
	clear(resend)
	s.resend = resend[:0]
}

// exec sends calls as one pipeline of onceCmds: go-redis retries no
// pipeline that holds a NoRetry command, so a batch is written at most
// once (go-redis's Cluster pipeline still follows MOVED and ASK, per
// command: replies that say the script did not run).
func (l *lane) exec(ctx context.Context, s *sender, calls []*call, cmds []onceCmd) {
	cmders := grow(&s.cmders, len(calls))
	for i, c := range calls {
		cmds[i] = newOnceCmd(ctx, c.args)
		cmders[i] = cmds[i]
	}
	_ = s.pipe.BatchProcess(ctx, cmders...)
	clear(cmders)
	if _, err := s.pipe.Exec(ctx); err != nil {
		for i := range cmds {
			if cmds[i].Err() == nil && cmds[i].Val() == nil {
				// a command go-redis left without a reply or an error
				cmds[i].SetErr(errNoReply(err))
			}
		}
	}
}

// grow makes *b n long, reallocating it only when it is shorter than n,
// and returns it.
func grow[T any](b *[]T, n int) []T {
	*b = slices.Grow((*b)[:0], n)[:n]
	return *b
}

// errNoReply is the error of a pipelined decision left without a reply
// when the pipeline failed with err.
func errNoReply(err error) error {
	return errors.Join(errors.New("redisstore: pipeline failed before this decision's reply"), err)
}
