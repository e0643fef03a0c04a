package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestReplyKindValkeyTexts: Valkey 8's error replies, where they differ
// from Redis 7.0's, classify as Redis's do (the first word carries the
// kind; a script error names "script:" in either server's wording).
func TestReplyKindValkeyTexts(t *testing.T) {
	for msg, want := range map[string]string{
		// Redis 7.0: "ERR user_script:1: Unknown Redis command called from script script: ..."
		"ERR Unknown command called from script script: 206396248e12c6e742fd7296250433c8d7343b74, on @user_script:1.":                  "script",
		"ERR user_script:1: oops script: ecbfd853fb31b2d3e1c05e7dc59c79ae5f9ae363, on @user_script:1.":                                 "script",
		"OOM command not allowed when used memory > 'maxmemory'. script: ee5bed0f6963e93a14eebfb64f07c299c1b4313f, on @user_script:1.": "oom",
		"LOADING Valkey is loading the dataset in memory":                                                                              "loading",
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.":                                             "clusterdown",
		"READONLY You can't write against a read only replica.":                                                                        "readonly",
		"MISCONF Valkey is configured to save RDB snapshots, but it's currently unable to persist to disk.":                            "other",
	} {
		assert.Equal(t, want, replyKind(msg), msg)
	}
}

// TestScriptErrorKindOnServer: a failing script's reply, in the words of
// the server under test (CI runs this against Redis and Valkey), is a
// script error.
func TestScriptErrorKindOnServer(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := srv.Version()
	require.NoError(t, err)
	for _, src := range []string{
		`return redis.call('nosuchcommand')`,
		`error('oops')`,
		`return 1 + nil`,
		`return undefinedglobal.x`,
	} {
		err := redis.NewScript(src).Run(ctx, c, nil).Err()
		require.Error(t, err, src)
		assert.Equal(t, "script", core.ClassifyError(replyErr(err)), "%s on %s: %v", src, v, err)
	}
}
