package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

func TestReplyKind(t *testing.T) {
	for msg, want := range map[string]string{
		"TRYAGAIN Multiple keys request during rehashing of slot":                          "tryagain",
		"CLUSTERDOWN The cluster is down":                                                  "clusterdown",
		"CLUSTERDOWN Hash slot not served":                                                 "clusterdown",
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.": "clusterdown",
		"MOVED 3999 127.0.0.1:6381":                                                        "redirect",
		"ASK 3999 127.0.0.1:6381":                                                          "redirect",
		"READONLY You can't write against a read only replica.":                            "readonly",
		"LOADING Redis is loading the dataset in memory":                                   "loading",
		"OOM command not allowed when used memory > 'maxmemory'.":                          "oom",
		"ERR user_script:3: Script attempted to access nonexistent global":                 "script",
		"ERR Error running script (call to f_x): @user_script:1: oops":                     "script",
		"WRONGTYPE Operation against a key holding the wrong kind of value script: 1b2c":   "script",
		"ERR unknown command 'evalsha'":                                                    "other",
	} {
		assert.Equal(t, want, replyKind(msg), msg)
	}
	// not a reply: left for core to classify
	var re *ReplyError
	assert.False(t, errors.As(replyErr(fmt.Errorf("x: %w", redis.ErrClosed)), &re))
	assert.Nil(t, replyErr(nil))
}

// TestReplyErrorKinds: a Redis error reply reaches the caller as a
// *ReplyError of its kind (the metrics' and the log's kind), not "other".
func TestReplyErrorKinds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := mustPolicy(t, core.Policy{Name: "kinds", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10)}})

	t.Run("oom", func(t *testing.T) {
		srv := redistest.StartNode(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
		s := newStore(t, srv.NewClient(t), WithClientTime())
		_, err := s.Take(ctx, "k", p, epoch, 1)
		require.Error(t, err)
		var re *ReplyError
		require.True(t, errors.As(err, &re), "%v", err)
		assert.Equal(t, "oom", core.ClassifyError(err), "%v", err)
	})
	t.Run("script", func(t *testing.T) {
		s, c, _ := nodeStore(t)
		keys, err := s.Keys(p, "k")
		require.NoError(t, err)
		require.NoError(t, c.HSet(ctx, keys[0], "f", "v").Err()) // the script's GET fails on a hash
		_, err = s.Take(ctx, "k", p, epoch, 1)
		require.Error(t, err)
		assert.Equal(t, "script", core.ClassifyError(err), "%v", err)
	})
}
