package redisstore

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/internal/redistest"
)

// cutProxy forwards TCP between go-redis and a real redis-server; armed
// with cut, it swallows the next reply the server sends and closes the
// client's connection instead: the server ran the command, the client
// sees EOF.
type cutProxy struct {
	*tcpProxy
	cut atomic.Int32
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{}
	p.tcpProxy = startTCPProxy(t, target, func(c, s net.Conn) {
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					if p.cut.Load() > 0 && p.cut.Add(-1) >= 0 {
						_ = c.Close()
						_ = s.Close()
						return
					}
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

// TestNoDoubleChargeAfterBrokenReply: the connection breaks after Redis
// ran the decision's script (the reply is lost), on a client whose
// options retry (MaxRetries 3, as a go-redis default client does): the
// store reports the failure and the key is charged exactly once, for
// Take and for TakeBatch's pipeline. A retry would run the script again.
func TestNoDoubleChargeAfterBrokenReply(t *testing.T) {
	srv := redistest.StartNode(t)
	proxy := startCutProxy(t, srv.Addr)
	opts := srv.ClientOptions()
	opts.Addr = proxy.addr()
	opts.MaxRetries = 3
	opts.PoolSize = 1
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, client, WithClientTime())
	p := mustPolicy(t, core.Policy{Name: "once", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10)}})
	ctx := context.Background()
	remaining := func(key string) int64 {
		t.Helper()
		d, err := s.Take(ctx, key, p, epoch, 0)
		require.NoError(t, err)
		return d.Remaining
	}

	t.Run("Take", func(t *testing.T) {
		_, err := s.Take(ctx, "k", p, epoch, 1) // loads the script, opens the connection
		require.NoError(t, err)
		proxy.cut.Store(1)
		_, err = s.Take(ctx, "k", p, epoch, 1)
		assert.Error(t, err, "the reply was lost")
		assert.Equal(t, "connection", core.ClassifyError(err), "%v", err)
		assert.Equal(t, int64(8), remaining("k"), "charged once by the first take and once by the broken one, never again")
	})

	t.Run("TakeBatch", func(t *testing.T) {
		batch := []storekit.BatchTake{{Key: "b", Policy: p, Now: epoch, Cost: 1}, {Key: "b", Policy: p, Now: epoch, Cost: 1}}
		require.NoError(t, s.TakeBatch(ctx, batch[:1]))
		proxy.cut.Store(1)
		err := s.TakeBatch(ctx, batch)
		assert.Error(t, err, "the replies were lost")
		assert.Equal(t, int64(7), remaining("b"), "the batch ran once")
	})
}

// TestNoScriptStillFallsBack: the one failure a decision retries itself,
// NOSCRIPT (the script provably did not run), still falls back to EVAL.
func TestNoScriptStillFallsBack(t *testing.T) {
	s, c, _ := nodeStore(t)
	p := mustPolicy(t, core.Policy{Name: "noscript", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10)}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := int64(1); i <= 3; i++ {
		require.NoError(t, c.ScriptFlush(ctx).Err())
		d, err := s.Take(ctx, "k", p, epoch, 1)
		require.NoError(t, err)
		assert.Equal(t, 10-i, d.Remaining)
	}
}
