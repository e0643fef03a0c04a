package redisstore

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// newStore builds a Store over client, failing the test on error.
func newStore(t testing.TB, client redis.UniversalClient, opts ...Option) *redisStore {
	t.Helper()
	s, err := newRedis(client, opts...)
	require.NoError(t, err)
	// a probe that never sees the process wait to run: the deadlines the
	// tests give are the ones the store keeps, whatever the machine's
	// load (TestStarvedProcessMovesTheDeadline injects the waits)
	s.lag = schedlag.New()
	return s
}

// nodeStore starts a node and returns a client-time store over it.
func nodeStore(t testing.TB, opts ...Option) (*redisStore, *redis.Client, *redistest.Server) {
	t.Helper()
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	return newStore(t, c, append([]Option{WithClientTime()}, opts...)...), c, srv
}

// mustPolicy validates p and returns a pointer to it.
func mustPolicy(t testing.TB, p core.Policy) *core.Policy {
	t.Helper()
	require.NoError(t, p.Validate())
	return &p
}

// counter is a go-redis hook counting the commands sent to Redis (each
// command of a pipeline counts).
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// epoch is a fixed instant for frozen-time tests.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// ref is the in-memory reference: core's Decide over a []int64 state.
type ref struct {
	c     *core.Compiled
	state map[string][]int64
}

// newRef compiles p (a test's valid policy: it panics on an invalid one).
func newRef(p *core.Policy) *ref {
	c, err := p.Compile()
	if err != nil {
		panic(err)
	}
	return &ref{c: c, state: map[string][]int64{}}
}

func (r *ref) take(key string, now time.Time, cost int64) core.Decision {
	st, ok := r.state[key]
	if !ok {
		st = make([]int64, r.c.StateWords())
		r.state[key] = st
	}
	return r.c.Decide(st, max(now.UnixMicro(), 0), cost)
}

type atomicInt = atomic.Int64

// tcpProxy forwards the TCP connections it accepts to a target: pipe
// gets each accepted connection (c) with its own connection to the
// target (s) and copies between them. closeAll closes every one so far;
// the end of the test closes the listener and them.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startTCPProxy(t *testing.T, target string, pipe func(c, s net.Conn)) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); p.closeAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			pipe(c, s)
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
