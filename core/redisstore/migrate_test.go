package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestTryAgainDuringSlotMigration: while a slot migrates, a two-limit
// decision whose keys are split between the two masters gets TRYAGAIN
// (the script did not run). The store sends it again every few
// milliseconds within the deadline, so once the second key has moved
// (the client follows ASK to the target) it decides, on the moved state.
func TestTryAgainDuringSlotMigration(t *testing.T) {
	cl := redistest.StartCluster(t)
	c, err := NewClient("redis://" + cl.Nodes[0].Addr + "," + cl.Nodes[1].Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	cc := c.(*redis.ClusterClient)
	s := newStore(t, c, WithClientTime(), WithLogger(nil))
	p := mustPolicy(t, core.Policy{Name: "migrate", Limits: []core.Limit{core.PerMinute(10), core.PerHour(100)}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = s.Take(ctx, "k", p, epoch, 1)
	require.NoError(t, err)
	keys, err := s.Keys(p, "k")
	require.NoError(t, err)
	byAddr := map[string]*redistest.Server{}
	for _, n := range cl.Nodes {
		byAddr[n.Addr] = n
	}
	m, err := cc.MasterForKey(ctx, keys[0])
	require.NoError(t, err)
	src := byAddr[m.Options().Addr]
	dst := cl.Nodes[0]
	if dst == src {
		dst = cl.Nodes[1]
	}
	slot, err := src.Do("CLUSTER", "KEYSLOT", keys[0])
	require.NoError(t, err)
	srcID, err := src.Do("CLUSTER", "MYID")
	require.NoError(t, err)
	dstID, err := dst.Do("CLUSTER", "MYID")
	require.NoError(t, err)
	do := func(n *redistest.Server, args ...string) {
		t.Helper()
		_, err := n.Do(args...)
		require.NoError(t, err, "%v", args)
	}
	do(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	host, port, _ := net.SplitHostPort(dst.Addr)
	do(src, "MIGRATE", host, port, "", "0", "5000", "KEYS", keys[0])

	// the second key moves once the decision has been answered TRYAGAIN:
	// synchronised on that reply, not on a sleep, so that a loaded machine
	// cannot move it before the decision is sent, or after its deadline
	tryAgain := &replySeen{want: "TRYAGAIN", seen: make(chan struct{})}
	cc.AddHook(tryAgain)
	moved := make(chan error, 1)
	go func() {
		select {
		case <-tryAgain.seen:
		case <-time.After(10 * time.Second):
			moved <- errors.New("no TRYAGAIN reply within 10 s")
			return
		}
		_, err := src.Do("MIGRATE", host, port, "", "0", "5000", "KEYS", keys[1])
		moved <- err
	}()
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	d, err := s.Take(dctx, "k", p, epoch, 1)
	require.NoError(t, <-moved)
	require.NoError(t, err, "kind %v", core.ClassifyError(err))
	assert.Equal(t, int64(8), d.Remaining, "decided on the migrated state")
}

// replySeen closes seen at the first command whose error contains want.
type replySeen struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (r *replySeen) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *replySeen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && strings.Contains(err.Error(), r.want) {
			r.once.Do(func() { close(r.seen) })
		}
		return err
	}
}

func (r *replySeen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
