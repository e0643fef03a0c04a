package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pipelining configures [WithPipelining]. The zero value takes every
// default.
type Pipelining struct {
	// MaxBatch is the most decisions one pipeline carries (0: 128).
	MaxBatch int
	// MaxQueue is the most decisions waiting for a pipeline per Redis
	// node (0: 4096). A caller that finds the queue full waits for room
	// within its context.
	MaxQueue int
	// Senders is the most pipelines in flight at once per Redis node
	// (0: 2), each on its own connection: while Redis runs one batch, the
	// next is being gathered and sent.
	Senders int
}

// Defaults of Pipelining.
const (
	defaultMaxBatch = 128
	defaultMaxQueue = 4096
	defaultSenders  = 2
)

// senderIdle is how long a sender goroutine with nothing to send waits
// before it exits; the next decision starts one again.
const senderIdle = time.Second

// WithPipelining makes the store send concurrent decisions bound for the
// same Redis node in shared pipelines: one write and one read for many
// EVALSHAs instead of a round trip each. It serves [Store.Take] and
// [Store.TakeElastic]; the other verbs and TakeBatch (already one
// pipeline per node) are unchanged. Each decision is still one script
// call, atomic on its own, so decisions are exact under concurrency as
// without pipelining, for every algorithm and multi-limit policy.
//
// How it sends: a decision that finds nothing in flight to its node is
// sent at once by its caller, exactly as without the option (a lone
// caller waits for nothing). Otherwise it joins the node's queue (at
// most MaxQueue, per node; a Cluster's nodes each have their own, chosen
// by the key's slot), and up to Senders goroutines per node drain it, at
// most MaxBatch decisions per pipeline, sending as soon as they are free:
// no timer, no window. The caller's context bounds the wait: a decision
// whose context ends while it is queued returns the context's error and
// is never sent; one whose context ends after it was sent returns the
// error at once (Redis may have counted it, as after a timeout without
// pipelining).
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
// Resources: the store then starts goroutines (Senders per node at most,
// started on demand, ending after a second with nothing to send), so it
// is no longer free of goroutines; a Store needs no Close either way.
// Pipelines hold up to Senders connections per node of the client's pool.
//
// Negative fields are an error.
func WithPipelining(cfg Pipelining) Option {
	return func(s *Store) error {
		if cfg.MaxBatch < 0 || cfg.MaxQueue < 0 || cfg.Senders < 0 {
			return fmt.Errorf("redisstore: WithPipelining(%+v): negative field", cfg)
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
		s.pipe = &pipeliner{cfg: cfg}
		return nil
	}
}

// pipeliner batches a store's script calls per Redis node.
type pipeliner struct {
	cfg    Pipelining
	single atomic.Pointer[lane] // the lane of a client that is not a Cluster
	lanes  sync.Map             // a Cluster's lanes: *redis.Client (master) → *lane
}

// lane is one Redis node's queue and its senders.
type lane struct {
	p        *pipeliner
	client   redis.UniversalClient
	q        chan *call
	inflight atomic.Int32 // script calls being sent: direct ones and pipelines
	senders  atomic.Int32 // sender goroutines alive
	batched  atomic.Int64 // decisions sent in pipelines (tests read it)
}

// call states: a queued call is taken by a sender, or abandoned by its
// caller, whichever comes first.
const (
	callQueued int32 = iota
	callTaken
	callAbandoned
)

// call is one decision in a lane's queue.
type call struct {
	ctx   context.Context
	sc    *script
	args  []any
	state atomic.Int32
	done  chan struct{} // receives once when vals and err are set (buffered 1)
	vals  []int64
	err   error
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// run runs sc with args as script.run does, batched with the other
// decisions for the same node.
func (p *pipeliner) run(ctx context.Context, client redis.UniversalClient, sc *script, args []any) ([]int64, error) {
	l := p.lane(ctx, client, args)
	if l == nil {
		return sc.run(ctx, client, args)
	}
	// nothing in flight to the node: send at once, as without pipelining
	if l.inflight.CompareAndSwap(0, 1) {
		vals, err := sc.run(ctx, client, args)
		l.inflight.Add(-1)
		return vals, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := callPool.Get().(*call)
	c.ctx, c.sc, c.args = ctx, sc, args
	c.state.Store(callQueued)
	select {
	case l.q <- c:
	default:
		select {
		case l.q <- c:
		case <-ctx.Done():
			c.reset()
			callPool.Put(c)
			return nil, ctx.Err()
		}
	}
	if l.senders.Load() < int32(p.cfg.Senders) {
		l.spawn()
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callQueued, callAbandoned) {
			// never sent; the sender that finds it drops it (and it
			// is not reused: the queue still holds it)
			return nil, ctx.Err()
		}
		// sent: the reply no longer matters (Redis may have counted the
		// decision, as after a timeout without pipelining). c stays
		// with its sender, which writes to it once more.
		return nil, ctx.Err()
	}
	vals, err := c.vals, c.err
	c.reset()
	callPool.Put(c)
	switch {
	case err == nil:
		return vals, nil
	case redis.HasErrorPrefix(err, "TRYAGAIN"):
		// the script did not run: the plain path waits and sends again
		return sc.run(ctx, client, args)
	}
	return nil, err
}

func (c *call) reset() {
	c.ctx, c.sc, c.args, c.vals, c.err = nil, nil, nil, nil, nil
}

// lane returns the lane of the node that holds args' keys, nil when it
// cannot tell (a Cluster whose slot map is not loaded).
func (p *pipeliner) lane(ctx context.Context, client redis.UniversalClient, args []any) *lane {
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		if l := p.single.Load(); l != nil {
			return l
		}
		p.single.CompareAndSwap(nil, p.newLane(client))
		return p.single.Load()
	}
	key, _ := args[3].(string)
	node, err := cc.MasterForKey(ctx, key)
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
	return &lane{p: p, client: client, q: make(chan *call, p.cfg.MaxQueue)}
}

// spawn starts a sender unless Senders are alive.
func (l *lane) spawn() {
	for {
		n := l.senders.Load()
		if n >= int32(l.p.cfg.Senders) {
			return
		}
		if l.senders.CompareAndSwap(n, n+1) {
			go l.send()
			return
		}
	}
}

// sender is one sender goroutine's buffers, reused from pipeline to
// pipeline so that a batch allocates little beyond its commands.
type sender struct {
	batch  []*call
	cmds   []onceCmd
	cmders []redis.Cmder
	pipe   redis.Pipeliner // reusable: Exec empties it
}

// send drains the queue in pipelines of at most MaxBatch until it has
// been empty for senderIdle.
func (l *lane) send() {
	s := &sender{
		batch:  make([]*call, 0, l.p.cfg.MaxBatch),
		cmds:   make([]onceCmd, l.p.cfg.MaxBatch),
		cmders: make([]redis.Cmder, l.p.cfg.MaxBatch),
		pipe:   l.client.Pipeline(),
	}
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		var first *call
		select {
		case first = <-l.q:
		default:
			idle.Reset(senderIdle)
			select {
			case first = <-l.q:
			case <-idle.C:
				l.senders.Add(-1)
				// a caller that queued before the decrement saw this
				// sender alive and started none: look once more
				select {
				case first = <-l.q:
					l.senders.Add(1)
				default:
					return
				}
			}
		}
		batch := append(s.batch[:0], first)
	gather:
		for len(batch) < cap(batch) {
			select {
			case c := <-l.q:
				batch = append(batch, c)
			default:
				break gather
			}
		}
		l.flush(s, batch)
		clear(batch)
	}
}

// flush sends the batch's live calls in one pipeline and hands each its
// reply. Calls abandoned while queued are dropped unsent.
func (l *lane) flush(s *sender, batch []*call) {
	live := batch[:0]
	var deadline time.Time
	forever := false
	for _, c := range batch {
		if !c.state.CompareAndSwap(callQueued, callTaken) {
			continue
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); !ok {
			forever = true
		} else if d.After(deadline) {
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	l.batched.Add(int64(len(live)))
	// the batch's context: the latest of its calls' deadlines (a caller
	// whose own ends sooner stops waiting); none if one has none, and then
	// the client's read timeout bounds it
	ctx := context.Background()
	if !forever {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	cmds := s.cmds[:len(live)]
	defer clear(cmds) // no reply outlives its batch in the buffer
	l.exec(ctx, s, live, cmds)
	again := 0 // live[:again]: the calls to send again, over answered ones
	for i, c := range live {
		if err := cmds[i].Err(); err != nil && isNoScript(err) && c.args[0] == "evalsha" {
			// the script did not run: EVAL sends it with its source
			c.args[0], c.args[1] = "eval", c.sc.srcArg
			live[again] = c
			again++
			continue
		}
		c.vals, c.err = cmds[i].Val(), cmds[i].Err()
		c.done <- struct{}{}
	}
	if again > 0 {
		live, cmds = live[:again], cmds[:again]
		l.exec(ctx, s, live, cmds)
		for i, c := range live {
			c.vals, c.err = cmds[i].Val(), cmds[i].Err()
			c.done <- struct{}{}
		}
	}
}

// exec sends calls as one pipeline of onceCmds: go-redis retries no
// pipeline that holds a NoRetry command, so a batch is written at most
// once (go-redis's Cluster pipeline still follows MOVED and ASK, per
// command: replies that say the script did not run).
func (l *lane) exec(ctx context.Context, s *sender, calls []*call, cmds []onceCmd) {
	cmders := s.cmders[:len(calls)]
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

// errNoReply is the error of a pipelined decision left without a reply
// when the pipeline failed with err.
func errNoReply(err error) error {
	return errors.Join(errors.New("redisstore: pipeline failed before this decision's reply"), err)
}
