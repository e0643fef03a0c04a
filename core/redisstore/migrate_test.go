package redisstore

import (
	"context"
	"errors"
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
	m := newSlotMigration(t, cl, cc, keys[0])
	m.start()
	require.NoError(t, m.move(keys[0]))

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
		moved <- m.move(keys[1])
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
