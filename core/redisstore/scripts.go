package redisstore

import (
	"context"
	"errors"
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
// of keys, as one command whose reply is read straight into []int64 (no
// per-element boxing, unlike redis.Script.Run's *redis.Cmd); on NOSCRIPT
// it sends the same arguments as EVAL with the source. It reuses args.
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
			return cmd.Val(), nil
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
type onceCmd struct{ *redis.IntSliceCmd }

// NoRetry returns true: never retry a decision.
func (onceCmd) NoRetry() bool { return true }

func newOnceCmd(ctx context.Context, args []any) onceCmd {
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return onceCmd{cmd}
}

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
