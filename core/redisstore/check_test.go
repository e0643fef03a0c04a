package redisstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

func checkCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestCheckNode(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	s := newStore(t, c)
	require.NoError(t, s.Check(checkCtx(t, 5*time.Second)))
	for _, sc := range allScripts {
		ok, err := c.ScriptExists(context.Background(), sc.rs.Hash()).Result()
		require.NoError(t, err)
		assert.True(t, ok[0], "Check leaves every script loaded")
	}

	t.Run("reloads after SCRIPT FLUSH", func(t *testing.T) {
		require.NoError(t, c.ScriptFlush(context.Background()).Err())
		require.NoError(t, s.Check(checkCtx(t, 5*time.Second)))
	})
	t.Run("refused", func(t *testing.T) {
		srv.Kill()
		err := s.Check(checkCtx(t, 5*time.Second))
		var ce *CheckError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, srv.Addr, ce.Addr)
		assert.Equal(t, "connect", ce.Step)
		assert.Equal(t, "connection", core.ClassifyError(err))
		assert.Contains(t, err.Error(), "redisstore: Check: "+srv.Addr+": connect: ")
		assert.Contains(t, err.Error(), "connection refused")
		assert.Contains(t, err.Error(), "is Redis running at that address")
	})
}

func TestCheckPausedServerTimesOut(t *testing.T) {
	srv := redistest.StartNode(t)
	s := newStore(t, srv.NewClient(t))
	srv.Pause()
	defer srv.Resume()
	err := s.Check(checkCtx(t, 200*time.Millisecond))
	require.Error(t, err)
	assert.Equal(t, "timeout", core.ClassifyError(err))
	assert.Contains(t, err.Error(), srv.Addr)
	assert.Contains(t, err.Error(), "no answer within the deadline")
}

func TestCheckAuth(t *testing.T) {
	srv := redistest.StartNode(t)
	_, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret")
	require.NoError(t, err)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	err = newStore(t, c).Check(checkCtx(t, 5*time.Second))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "authentication failed")
	opts := srv.ClientOptions()
	opts.Password = "s3cret"
	good := redis.NewClient(opts)
	defer good.Close()
	assert.NoError(t, newStore(t, good).Check(checkCtx(t, 5*time.Second)))
}

func TestCheckCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := cl.NewClient(t)
	s := newStore(t, c)
	require.NoError(t, s.Check(checkCtx(t, 10*time.Second)))
	for _, n := range cl.Nodes {
		nc := n.NewClient(t)
		for _, sc := range allScripts {
			ok, err := nc.ScriptExists(context.Background(), sc.rs.Hash()).Result()
			require.NoError(t, err)
			assert.True(t, ok[0], "every master holds every script: %s", n.Addr)
		}
	}

	cl.Nodes[1].Kill()
	err := s.Check(checkCtx(t, 10*time.Second))
	require.Error(t, err)
	var ce *CheckError
	require.ErrorAs(t, err, &ce)
	// The others still list the dead master (the node timeout has not
	// passed): it is the one named.
	assert.Equal(t, cl.Nodes[1].Addr, ce.Addr, err.Error())
	assert.Equal(t, "connection", core.ClassifyError(err))
}

func TestCheckClusterSeedsDown(t *testing.T) {
	ports := []string{}
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		require.NoError(t, l.Close())
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:" + ports[0], "127.0.0.1:" + ports[1]}, ContextTimeoutEnabled: true})
	defer c.Close()
	err := newStore(t, c).Check(checkCtx(t, 3*time.Second))
	var ce *CheckError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "list servers", ce.Step)
	assert.Equal(t, "127.0.0.1:"+ports[0]+",127.0.0.1:"+ports[1], ce.Addr)
	assert.Contains(t, err.Error(), "connection refused")
}

func TestCheckRing(t *testing.T) {
	a, b := redistest.StartNode(t), redistest.StartNode(t)
	r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}, ContextTimeoutEnabled: true})
	defer r.Close()
	s := newStore(t, r)
	require.NoError(t, s.Check(checkCtx(t, 5*time.Second)))
	b.Kill()
	err := s.Check(checkCtx(t, 5*time.Second))
	require.Error(t, err)
	assert.Contains(t, err.Error(), b.Addr)
}

func TestVersionAtLeast(t *testing.T) {
	for _, tt := range []struct {
		v, min string
		want   bool
	}{
		{"7.0.15", "5.0.0", true},
		{"5.0.0", "5.0.0", true},
		{"5.0", "5.0.0", true},
		{"4.0.14", "5.0.0", false},
		{"10.0.0", "5.0.0", true},
		{"3.2.100", "5.0.0", false},
		{"255.255.255", "5.0.0", true},
		{"x.y", "5.0.0", false},
	} {
		assert.Equal(t, tt.want, versionAtLeast(tt.v, tt.min), tt.v)
	}
	assert.Equal(t, "7.0.15", infoField("# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n", "redis_version"))
	assert.Empty(t, infoField("# Server\r\n", "redis_version"))
}

func TestCheckErrorText(t *testing.T) {
	err := &CheckError{Addr: "h:1", Step: "version", Err: errors.New("server runs Redis 4.0.9"), Hint: "upgrade"}
	assert.Equal(t, "redisstore: Check: h:1: version: server runs Redis 4.0.9 (upgrade)", err.Error())
	assert.Equal(t, "other", core.ClassifyError(err))
}
