package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/redis/go-redis/v9"
)

// fake is an in-memory remote store for the tier's logic tests: core's
// own math over per-(policy name, key) state, deciding at the now passed
// (like the Redis store with WithClientTime). It is not a LocalStore, can
// fail or hang on demand, counts calls, and can peek at what it would
// decide without consuming. With ping set it has a Ping method (wrap it in
// pingFake); batch makes it a storekit.BatchStore (wrap it in batchFake).
type fake struct {
	mu       sync.Mutex
	compiled map[*core.Policy]*core.Compiled
	state    map[string][]int64

	calls   atomic.Int64 // takes (batch entries count one each)
	batches atomic.Int64 // TakeBatch calls
	charged atomic.Int64 // units consumed by admitted takes
	fail    atomic.Pointer[error]
	failAt  atomic.Int64 // when > 0, the take with this call number fails with errDown
	hang    atomic.Bool
	// gate, when set, holds every take until it is closed (a stall that
	// ends) or the take's context ends
	gate atomic.Pointer[chan struct{}]

	// onTake, when set, sees every admitted take (time in µs and cost).
	onTake func(p *core.Policy, key string, t, cost int64)
}

func newFake() *fake {
	return &fake{compiled: map[*core.Policy]*core.Compiled{}, state: map[string][]int64{}}
}

// errDown is a connection failure: an outage, which counts towards the
// breaker.
var errDown = fmt.Errorf("fake: remote down: %w", syscall.ECONNREFUSED)

func (f *fake) setFail(err error) {
	if err == nil {
		f.fail.Store(nil)
		return
	}
	f.fail.Store(&err)
}

func (f *fake) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if n := f.calls.Add(1); n == f.failAt.Load() {
		return core.Decision{}, errDown
	}
	if f.hang.Load() {
		<-ctx.Done()
		return core.Decision{}, ctx.Err()
	}
	if g := f.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return core.Decision{}, ctx.Err()
		}
	}
	if e := f.fail.Load(); e != nil {
		return core.Decision{}, *e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, c := f.st(p, key)
	d := c.Decide(st, now.UnixMicro(), cost)
	if d.Allowed && !d.Shadowed {
		f.charged.Add(cost)
		if f.onTake != nil {
			f.onTake(p, key, now.UnixMicro(), cost)
		}
	}
	return d, nil
}

// st returns key's state under p; f.mu is held.
func (f *fake) st(p *core.Policy, key string) ([]int64, *core.Compiled) {
	c := f.compiled[p]
	if c == nil {
		var err error
		if c, err = p.Compile(); err != nil {
			panic(err)
		}
		f.compiled[p] = c
	}
	k := p.Name + "\x00" + key
	st := f.state[k]
	if st == nil {
		st = make([]int64, c.StateWords())
		f.state[k] = st
	}
	return st, c
}

// peek is the decision a take of cost at now would get, without consuming.
func (f *fake) peek(key string, p *core.Policy, now time.Time, cost int64) core.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, c := f.st(p, key)
	cp := append([]int64(nil), st...)
	return c.Decide(cp, now.UnixMicro(), cost)
}

// batchFake is a fake with TakeBatch.
type batchFake struct{ *fake }

func (f batchFake) TakeBatch(ctx context.Context, b []storekit.BatchTake) error {
	f.batches.Add(1)
	if f.hang.Load() {
		<-ctx.Done()
		for i := range b {
			b[i].Err = ctx.Err()
		}
		return ctx.Err()
	}
	if e := f.fail.Load(); e != nil {
		for i := range b {
			b[i].Err = *e
		}
		return *e
	}
	for i := range b {
		b[i].Decision, b[i].Err = f.Take(ctx, b[i].Key, b[i].Policy, b[i].Now, b[i].Cost)
	}
	return nil
}

// pingFake is a batchFake with Ping.
type pingFake struct{ batchFake }

func (f pingFake) Ping(ctx context.Context) error {
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if e := f.fail.Load(); e != nil {
		return *e
	}
	return nil
}

// cmdCounter is a go-redis hook counting the commands sent to Redis (each
// command of a pipeline counts).
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
