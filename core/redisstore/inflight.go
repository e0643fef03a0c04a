package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

var _ storekit.SlotStore = (*redisStore)(nil)

// luaAcquireSlot is a concurrency limit's acquire (and renewal), one round
// trip. The key is a sorted set of holder tokens scored by their lease
// expiry in ms (Redis TIME, or ARGV[4] under WithClientTime). It drops the
// expired holders; a token already present is renewed (its score moved to
// now + lease) whatever the count; a new one is added while fewer than
// ARGV[2] hold a slot. The key's TTL is set to its latest expiry, so an
// abandoned key goes away on its own.
//
//	KEYS[1]  the set
//	ARGV[1]  token, ARGV[2] max, ARGV[3] lease ms, ARGV[4] now ms or ""
//
// Reply: {1 admitted or renewed | 0 denied, holders after the call}.
const luaAcquireSlot = `
local now = ARGV[4]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local key, token = KEYS[1], ARGV[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local n = redis.call('ZCARD', key)
local mine = redis.call('ZSCORE', key, token)
if not mine and n >= tonumber(ARGV[2]) then
  return {0, n}
end
local exp = now + tonumber(ARGV[3])
redis.call('ZADD', key, exp, token)
if not mine then n = n + 1 end
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', key, math.max(tonumber(last[2]) - now, 1) + 1000)
return {1, n}
`

var acquireSlotScript = newScript(luaAcquireSlot)

// slotKey is the Redis key of key's holders under p: the prefix, a hash
// tag of the limit's name and the key (hashed: no raw key material in
// Redis), and ":inflight".
func (s *redisStore) slotKey(key string, p *core.ConcurrencyPolicy) string {
	h := sha256.New()
	h.Write([]byte("inflight\x00"))
	h.Write([]byte(p.Name))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	b := make([]byte, 0, len(s.prefix)+2+tagLen+9)
	b = append(b, s.prefix...)
	b = append(b, '{')
	b = base64.RawURLEncoding.AppendEncode(b, sum[:tagLen*3/4])
	b = append(b, "}:inflight"...)
	return string(b)
}

// AcquireSlot implements [storekit.SlotStore] in one round trip (a Lua script
// over a sorted set of holder tokens scored by lease expiry; see the
// package doc). Expiry is judged on Redis TIME, or on now under
// [WithClientTime]. A Cluster holds each key's set in one slot.
func (s *redisStore) AcquireSlot(ctx context.Context, key string, p *core.ConcurrencyPolicy, token uint64, now time.Time) (int64, bool, error) {
	lease := p.Lease
	if lease <= 0 {
		lease = core.DefaultLease
	}
	nowArg := ""
	if s.clientTime {
		nowArg = strconv.FormatInt(now.UnixMilli(), 10)
	}
	args := []any{"evalsha", acquireSlotScript.shaArg, 1, s.slotKey(key, p),
		strconv.FormatUint(token, 10), p.Max, lease.Milliseconds(), nowArg}
	v, err := acquireSlotScript.run(ctx, s.client, args)
	if err != nil {
		return 0, false, fmt.Errorf("redisstore: acquiring an in-flight slot of %q: %w", p.Name, err)
	}
	if len(v) != 2 {
		return 0, false, fmt.Errorf("redisstore: acquiring an in-flight slot of %q: unexpected reply %v", p.Name, v)
	}
	return v[1], v[0] == 1, nil
}

// ReleaseSlot implements [storekit.SlotStore]: one ZREM.
func (s *redisStore) ReleaseSlot(ctx context.Context, key string, p *core.ConcurrencyPolicy, token uint64) error {
	if err := s.client.ZRem(ctx, s.slotKey(key, p), strconv.FormatUint(token, 10)).Err(); err != nil {
		return fmt.Errorf("redisstore: releasing an in-flight slot of %q: %w", p.Name, err)
	}
	return nil
}
