package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/redis/go-redis/v9"
)

var _ storekit.BatchStore = (*redisStore)(nil)

// TakeBatch applies every entry of batch as Take would, in one
// round trip per Redis node: the EVALSHAs go out as one go-redis pipeline
// (a Cluster client splits it into one pipeline per node, in order), and
// entries whose script Redis had lost (NOSCRIPT) are sent again as EVAL in
// a second pipeline. Each entry's Decision and Err are written in place;
// every entry is atomic on its own, and entries for one key apply in batch
// order. Entries with an invalid or nil policy get their own error and
// are not sent.
//
// The returned error is non-nil only when no entry could be decided (every
// entry's Err is then set too): a dead or hung Redis, a done ctx. The call
// is bounded by ctx's deadline.
func (s *redisStore) TakeBatch(ctx context.Context, batch []storekit.BatchTake) error {
	if ctx == nil {
		ctx = context.Background()
	}
	todo := s.prepareBatch(batch)
	if len(todo) == 0 {
		return nil
	}
	err := runBatch(ctx, s.client, todo)
	retry, failed := s.readBatch(batch, todo, true)
	if len(retry) > 0 {
		rerr := runBatch(ctx, s.client, retry)
		_, refailed := s.readBatch(batch, retry, false)
		failed += refailed
		if err == nil || rerr != nil {
			err = rerr
		}
	}
	if failed == len(todo) && err != nil {
		return fmt.Errorf("redisstore: TakeBatch: %w", replyErr(err))
	}
	return nil
}

// batchTake is one entry of a TakeBatch on its way: the entry's index,
// its compiled policy, its script arguments and its command.
type batchTake struct {
	i    int
	c    *compiled
	args []any
	cmd  onceCmd
}

// prepareBatch clears every entry's result and returns the entries to
// send; an entry with a nil or invalid policy gets its error instead.
func (s *redisStore) prepareBatch(batch []storekit.BatchTake) []batchTake {
	todo := make([]batchTake, 0, len(batch))
	for i := range batch {
		b := &batch[i]
		b.Decision, b.Err = core.Decision{}, nil
		if b.Policy == nil {
			b.Err = errors.New("redisstore: TakeBatch: nil policy")
			continue
		}
		c, err := s.policy(b.Policy)
		if err != nil {
			b.Err = err
			continue
		}
		todo = append(todo, batchTake{i: i, c: c, args: s.args(c, c.tailAt(b.Now), b.Key, b.Now, b.Cost)})
	}
	return todo
}

// runBatch sends list's commands in one pipeline and returns the
// pipeline's error.
func runBatch(ctx context.Context, client redis.UniversalClient, list []batchTake) error {
	pipe := client.Pipeline()
	for j := range list {
		list[j].cmd = newOnceCmd(ctx, list[j].args)
		_ = pipe.Process(ctx, list[j].cmd)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// readBatch writes the result of each of sent's commands into its batch
// entry and counts the entries that failed. When retryable, an entry
// whose script Redis had lost is returned, turned into an EVAL, to be
// sent again instead.
func (s *redisStore) readBatch(batch []storekit.BatchTake, sent []batchTake, retryable bool) (retry []batchTake, failed int) {
	for _, t := range sent {
		b := &batch[t.i]
		if cerr := t.cmd.Err(); cerr != nil {
			if retryable && isNoScript(cerr) {
				t.args[0], t.args[1] = "eval", t.c.script.srcArg
				retry = append(retry, t)
				continue
			}
			b.Err = s.failed(t.c, cerr)
			failed++
			continue
		}
		vals, err := t.cmd.ints()
		if err != nil {
			b.Err = s.failed(t.c, err)
			failed++
			continue
		}
		b.Decision, b.Err = decision(t.c, vals, false)
	}
	return retry, failed
}

// args builds the script arguments of one take (Take and TakeBatch). Any
// cost above every capacity decides like capacity+1 (denied, never
// retryable, the same state written): clamping keeps Lua's products exact.
func (s *redisStore) args(c *compiled, tail []any, key string, now time.Time, cost int64) []any {
	return s.appendArgs(make([]any, 0, 3+len(c.suffixes)+2+len(tail)), nil, c, tail, key, now, cost)
}

// appendArgs appends args' arguments to dst; with ka non-nil, a single
// key goes in as ka's reused bytes instead of a new string.
func (s *redisStore) appendArgs(dst []any, ka *keyArg, c *compiled, tail []any, key string, now time.Time, cost int64) []any {
	cost = min(max(cost, 0), c.maxEff+1)
	dst = append(dst, "evalsha", c.script.shaArg, c.nkeys)
	var kb [maxKeyBase + 8]byte
	base := s.keyBase(kb[:0], c, key)
	if ka != nil && len(c.suffixes) == 1 {
		dst = append(dst, ka.set(base, c.suffixes[0]))
	} else {
		for _, suf := range c.suffixes {
			dst = append(dst, string(append(base, suf...)))
		}
	}
	if s.clientTime {
		dst = append(dst, max(now.UnixMicro(), 0))
	} else {
		dst = append(dst, "")
	}
	dst = append(dst, cost)
	return append(dst, tail...)
}

// keyArg is a key argument reused from call to call: its bytes, and the
// same bytes boxed once as a []byte, so that a call of a key of the
// same length as the last allocates nothing for it.
type keyArg struct {
	b   []byte
	box any // b, boxed
}

// set writes base and suf into k and returns k boxed.
func (k *keyArg) set(base []byte, suf string) any {
	n := len(base) + len(suf)
	if len(k.b) != n || k.box == nil {
		if cap(k.b) < n {
			k.b = make([]byte, n, max(n, 64))
		}
		k.b = k.b[:n]
		k.box = k.b
	}
	copy(k.b[copy(k.b, base):], suf)
	return k.box
}

// Ping implements [Store.Ping].
func (s *redisStore) Ping(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
	default:
		err = s.client.Ping(ctx).Err()
	}
	if err != nil {
		s.reload.after(err)
		return fmt.Errorf("redisstore: Ping: %w", replyErr(err))
	}
	return nil
}
