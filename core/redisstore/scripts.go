package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/redis/go-redis/v9"
)

// The scripts' sources: lua_generic.go (one per algorithm, any policy, and
// the calling convention; the sliding log's in lua_slidinglog.go), lua_single.go (one limit of each algorithm,
// written out) and lua_multi.go (several GCRA or fixed-window limits).

// script is a Lua script run with EVALSHA, falling back to EVAL when
// Redis does not have it (NOSCRIPT: a restart, SCRIPT FLUSH, a new shard).
type script struct {
	rs             *redis.Script // for SCRIPT LOAD (every shard)
	shaArg, srcArg any           // the digest and the source, boxed once
}

func newScript(src string) *script {
	rs := redis.NewScript(src)
	return &script{rs: rs, shaArg: rs.Hash(), srcArg: src}
}

// load loads the script into Redis (every master of a Cluster or Ring).
func (sc *script) load(ctx context.Context, c redis.UniversalClient) error {
	return sc.rs.Load(ctx, c).Err()
}

// run sends args, which start with "evalsha", the digest and the number
// of keys, as one command whose reply it returns as the scripts' integer
// array (see onceCmd.ints); on NOSCRIPT it sends the same arguments as
// EVAL with the source. It reuses args.
//
// The command is never retried by go-redis (see onceCmd). run sends it
// again only after the two replies that say the script did not run:
// NOSCRIPT (as EVAL), and TRYAGAIN (a Cluster slot being migrated holds
// some of the keys on each side; the call is sent again every
// tryAgainWait, at most maxTryAgain times and never past ctx's deadline,
// until the keys are on one side).
func (sc *script) run(ctx context.Context, c redis.UniversalClient, args []any) ([]int64, error) {
	for tries := 0; ; tries++ {
		cmd := newOnceCmd(ctx, args)
		err := c.Process(ctx, cmd)
		switch {
		case err == nil:
			return cmd.ints()
		case isNoScript(err) && args[0] == "evalsha":
			args[0], args[1] = "eval", sc.srcArg
		case redis.HasErrorPrefix(err, "TRYAGAIN") && tries < maxTryAgain && pause(ctx, tryAgainWait):
		default:
			return nil, err
		}
	}
}

// tryAgainWait and maxTryAgain pace run's calls after TRYAGAIN.
const (
	tryAgainWait = 5 * time.Millisecond
	maxTryAgain  = 20
)

// pause waits d, or returns false at once if ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// isNoScript reports whether err is Redis's NOSCRIPT reply: the script
// did not run.
func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}

// onceCmd is a script call go-redis must not retry. go-redis retries a
// command after an error it deems transient (EOF, a reset, a read
// timeout, TRYAGAIN, CLUSTERDOWN, ...), by the client's MaxRetries and,
// on a Cluster, again on another attempt; but a connection that broke
// after the request was written may have run the script, and running it
// again would charge the decision twice. NoRetry stops every such retry,
// whatever the client's options (go-redis still replays a command it
// provably never wrote).
type onceCmd struct{ *redis.Cmd }

// NoRetry returns true: never retry a decision.
func (onceCmd) NoRetry() bool { return true }

// newOnceCmd reads any reply shape (a *redis.Cmd, not an IntSliceCmd):
// a script answers the common allowed decision with a packed string
// (see unpackAllowed) and everything else with an array of integers.
func newOnceCmd(ctx context.Context, args []any) onceCmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return onceCmd{cmd}
}

// ints returns the command's error, or its reply as the scripts' array
// of integers (an allowed answer packed in a string unpacked into it);
// a reply of any other shape is an error.
func (c onceCmd) ints() ([]int64, error) {
	v, err := c.Result()
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case string:
		if out, ok := unpackAllowed(v); ok {
			return out, nil
		}
	case []any:
		out := make([]int64, len(v))
		for i, e := range v {
			n, ok := e.(int64)
			if !ok {
				return nil, fmt.Errorf("unexpected script reply %v", v)
			}
			out[i] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected script reply %q", fmt.Sprint(v))
}

// unpackAllowed reads a script's packed allowed answer: a reply built
// from a Lua table costs Redis about 1 µs more per call than a string
// (measured in docs/envoy.md), so the scripts answer an allowed decision
// with struct.pack('<i8i8', remaining, reset), or '<i8i8i8' with the
// binding limit's index (0-based) after them, which stands for the array
// {1, index, remaining, reset, 0}. Any other string is not one (false).
func unpackAllowed(s string) ([]int64, bool) {
	if len(s) != 16 && len(s) != 24 {
		return nil, false
	}
	out := []int64{1, 0, le64(s[0:8]), le64(s[8:16]), 0}
	if len(s) == 24 {
		out[1] = le64(s[16:24])
	}
	return out, true
}

// le64 is the little-endian int64 in s's first 8 bytes (Lua struct's
// '<i8', the packed answers and the sliding log's stamps).
func le64(s string) int64 { return int64(binary.LittleEndian.Uint64([]byte(s[:8]))) }

// generic are the scripts for any policy, indexed by core.Algorithm.
var generic = [...]*script{
	newScript(luaGCRA),
	newScript(luaTokenBucket),
	newScript(luaFixedWindow),
	newScript(luaSlidingLog),
	newScript(luaSlidingCounter),
}

// multi are the scripts for two or more limits, indexed by
// core.Algorithm; nil where the generic script serves.
var multi = [...]*script{
	core.GCRA:                 newScript(padded(luaGCRAN)),
	core.TokenBucket:          nil,
	core.FixedWindow:          newScript(padded(luaFixedWindowN)),
	core.SlidingWindowLog:     nil,
	core.SlidingWindowCounter: nil,
}

// single are the single-limit scripts, indexed by core.Algorithm; nil
// where the generic script serves.
var single = [...]*script{
	core.GCRA:                 newScript(padded(luaGCRA1)),
	core.TokenBucket:          newScript(padded(luaTokenBucket1)),
	core.FixedWindow:          newScript(padded(luaFixedWindow1)),
	core.SlidingWindowLog:     newScript(padded(luaSlidingLog1)),
	core.SlidingWindowCounter: newScript(padded(luaSlidingCounter1)),
}

// bakeable are the single-limit templates whose constants bake writes
// into a per-policy copy (see bake.go), indexed by core.Algorithm.
var bakeable = [...]string{
	core.GCRA:                 padded(luaGCRA1),
	core.TokenBucket:          padded(luaTokenBucket1),
	core.FixedWindow:          padded(luaFixedWindow1),
	core.SlidingWindowLog:     "",
	core.SlidingWindowCounter: "",
}

// bakeableMulti are the multi-limit templates bake writes a policy's
// constants into (the table A), indexed by core.Algorithm.
var bakeableMulti = [...]string{
	core.GCRA:                 padded(luaGCRAN),
	core.FixedWindow:          padded(luaFixedWindowN),
	core.SlidingWindowCounter: "",
}

// allScripts are every script, for Preload.
var allScripts = func() []*script {
	var all []*script
	for _, sc := range append(append(generic[:], single[:]...), multi[:]...) {
		if sc != nil {
			all = append(all, sc)
		}
	}
	return all
}()

// padded compiles the TTL pads into a script.
func padded(src string) string {
	return strings.NewReplacer(
		"$PADS", strconv.FormatInt(ttlRoundPad.Milliseconds(), 10),
		"$PADC", strconv.FormatInt((ttlRoundPad+clientTimeSlack).Milliseconds(), 10),
	).Replace(src)
}
