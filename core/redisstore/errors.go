package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkit/limitkit/core"
)

// ReplyError is a Redis error reply (TRYAGAIN, CLUSTERDOWN, OOM, a script
// error, ...) as the store returns it, wrapped in "redisstore: ..." text:
// its ErrorKind gives core.ClassifyError, and so the metrics' kind label
// and the log's kind field, the reply's kind; Unwrap gives go-redis's
// error. Errors of the connection (refused, reset, timeout) are not
// wrapped: core classifies them itself.
type ReplyError struct {
	// Kind is the reply's kind, in core.ClassifyError's words:
	// "tryagain", "clusterdown", "redirect", "readonly", "loading",
	// "oom", "script" or "other".
	Kind string
	// Err is go-redis's error; its text is Redis's reply.
	Err error
}

// Error returns Redis's reply.
func (e *ReplyError) Error() string { return e.Err.Error() }

// Unwrap returns go-redis's error.
func (e *ReplyError) Unwrap() error { return e.Err }

// ErrorKind returns Kind: core.ClassifyError asks it.
func (e *ReplyError) ErrorKind() string { return e.Kind }

// replyKinds map the first word of a Redis error reply to its kind.
var replyKinds = map[string]string{
	"TRYAGAIN":    "tryagain",
	"CLUSTERDOWN": "clusterdown",
	"MASTERDOWN":  "clusterdown",
	"MOVED":       "redirect",
	"ASK":         "redirect",
	"READONLY":    "readonly",
	"LOADING":     "loading",
	"OOM":         "oom",
}

// replyKind is the kind of a Redis error reply's text.
func replyKind(msg string) string {
	word, _, _ := strings.Cut(msg, " ")
	if k, ok := replyKinds[word]; ok {
		return k
	}
	// a script's runtime error: "ERR user_script:3: ..." (Redis 7),
	// "ERR Error running script ..." (Redis 5, 6), or a compile error
	if strings.HasPrefix(msg, "ERR user_script:") || strings.HasPrefix(msg, "ERR Error running script") ||
		strings.HasPrefix(msg, "ERR Error compiling script") || strings.Contains(msg, "script:") {
		return "script"
	}
	return "other"
}

// replyErr wraps a Redis error reply in a *ReplyError; other errors are
// returned as they are.
func replyErr(err error) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	// go-redis reports some of its own errors (a closed client, a pool
	// timeout) as redis.Error too: those are not replies
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	return &ReplyError{Kind: replyKind(re.Error()), Err: err}
}

// reloadEvery is the least time between two slot-map reloads the store
// asks of a Cluster client. go-redis coalesces the requests and waits
// 200 ms between two reloads of its own.
const reloadEvery = 100 * time.Millisecond

// reloader asks a Cluster client to reload its slot map after an error
// that says the map may be stale, at most once per reloadEvery.
type reloader struct {
	cc   *redis.ClusterClient // nil: not a Cluster, nothing to do
	next atomic.Int64         // unix ns before which no reload is asked
}

// after looks at the error of a call and asks for a reload when it says
// the key's master may have moved: the connection failed (a dead master
// is never going to answer MOVED), the call timed out (a frozen one),
// or Redis answered CLUSTERDOWN, MOVED/ASK (past the client's redirect
// limit) or READONLY (a demoted master).
func (r *reloader) after(err error) {
	if r.cc == nil || err == nil {
		return
	}
	switch core.ClassifyError(err) {
	case "connection", "timeout", "clusterdown", "redirect", "readonly":
	default:
		return
	}
	now := time.Now().UnixNano()
	next := r.next.Load()
	if now < next || !r.next.CompareAndSwap(next, now+int64(reloadEvery)) {
		return
	}
	r.cc.ReloadState(context.Background())
}
