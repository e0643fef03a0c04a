package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// luaGCRA1E: GCRA, one limit, elastic (core.Policy.Elastic), written out
// as the hard luaGCRA1 is: one GET, at most one write. It reads and writes
// the tat as the other GCRA scripts do and replies in the generic scripts'
// shape, with the elastic flag (see the calling convention in lua_generic.go).
//
//	ARGV[3]  emission interval T
//	ARGV[4]  tolerance tau = capacity × T
//	ARGV[5]  the ceiling's tolerance tauE = ceiling × T (it also bounds
//	         the normalization of a clock step, as in core)
//	ARGV[6]  "1": the nominal take (within tau; on a denial, flag = the
//	         ceiling would admit); "2": the elastic take (within tauE;
//	         flag = admitted above tau)
//
// The reply's remaining is against the tolerance the take used (Go
// subtracts the ceiling's margin from an elastic take's). Elastic policies
// take neither count_denied nor soft overage (core refuses them).
const luaGCRA1E = luaNow + `
local cost, t, tau, taue, mode = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local key = KEYS[1]
local v = redis.call('GET', key)
local old = 0
if v then old = tonumber(v) or 0 end
-- a tat beyond now + 2×tauE (the clock went back) is normalized to
-- now + tauE; nearer, it stays (a caller that read the clock first, or
-- elastic admissions)
local fix = old - now > 2 * taue
if fix then old = now + taue end
local tat = old
if tat < now then tat = now end
local newtat = tat + cost * t
local lim = tau
if mode == '2' then lim = taue end
local function keep()
  if fix then
    redis.call('SET', key, old, 'PX', math.ceil((old - now) / 1000) + pad)
  elseif v and redis.call('PTTL', key) == -1 then
    if old > now then
      redis.call('PEXPIRE', key, math.ceil((old - now) / 1000) + pad)
    else
      redis.call('DEL', key)
    end
  end
end
if newtat - now <= lim then
  if cost > 0 then
    redis.call('SET', key, newtat, 'PX', math.ceil((newtat - now) / 1000) + pad)
  else
    keep()
  end
  local flag = 0
  if mode == '2' and newtat - now > tau then flag = 1 end
  return {1, 0, math.floor((lim - newtat + now) / t), newtat - now, 0, flag}
end
keep()
local retry = newtat - lim - now
if cost * t > lim then retry = -1 end
local flag = 0
if mode == '1' and newtat - now <= taue then flag = 1 end
return {0, 0, 0, tat - now, retry, flag}
`

// luaFixedWindow1E: fixed window, one limit, elastic: one GET, at most
// one write, in the fixed-window encoding (count × M + window index mod
// M, M worked out from the ceiling, which bounds the count; see
// luaFixedWindow). The window after now's stays in force and one further
// ahead has its count carried into now's, as in core.
//
//	ARGV[3]  window W
//	ARGV[4]  capacity
//	ARGV[5]  the ceiling's capacity
//	ARGV[6]  M
//	ARGV[7]  "1": the nominal take (flag on a denial: the ceiling would
//	         admit); "2": the elastic take (flag: admitted above capacity)
const luaFixedWindow1E = luaNow + `
local cost, w, capa, cape, m, mode = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local key = KEYS[1]
local v = redis.call('GET', key)
local ix, count = 0, 0
local x = v and tonumber(v)
if x and x >= 0 then
  ix = x % m
  count = (x - ix) / m
end
local stored = count
local idx = math.floor(now / w)
local fix = false
if count ~= 0 then
  local diff = (idx - ix) % m
  if diff >= m / 2 then diff = diff - m end
  if diff > 0 then count = 0 elseif diff == -1 then idx = idx + 1 elseif diff < -1 then fix = true end
end
local reset = (idx + 1) * w - now
local lim = capa
if mode == '2' then lim = cape end
local ok, rem, retry, n, flag = 1, 0, 0, -1, 0
if count + cost <= lim then
  rem = lim - count - cost
  if cost > 0 then n = count + cost end
  if mode == '2' and count + cost > capa then flag = 1 end
else
  ok, retry = 0, reset
  if cost > lim then retry = -1 end
  if mode == '1' and count + cost <= cape then flag = 1 end
end
if n < 0 and fix then n = count end
if n >= 0 then
  redis.call('SET', key, n * m + idx % m, 'PX', math.ceil(reset / 1000) + pad)
elseif v and redis.call('PTTL', key) == -1 then
  if stored ~= 0 then
    redis.call('PEXPIRE', key, math.ceil(reset / 1000) + pad)
  else
    redis.call('DEL', key)
  end
end
return {ok, 0, rem, reset, retry, flag}
`

// gcra1E and fixedWindow1E are the single-limit elastic scripts.
var (
	gcra1E        = newScript(padded(luaGCRA1E))
	fixedWindow1E = newScript(padded(luaFixedWindow1E))
)

func init() { allScripts = append(allScripts, gcra1E, fixedWindow1E) }

// luaRefundGCRA gives cost back to a GCRA policy's keys, one per limit
// (storekit.Refunder, what a core.CapacityLimit releases): each tat moves
// back by cost × its emission interval, never below now (a tat at or
// before now is a full bucket: the key is deleted).
//
//	ARGV[2]      cost
//	ARGV[2 + i]  the emission interval of limit i
const luaRefundGCRA = luaNow + `
local cost = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  local tat = v and tonumber(v)
  if tat and tat > now then
    local nt = tat - cost * tonumber(ARGV[2 + i])
    if nt > now then
      redis.call('SET', key, nt, 'PX', math.ceil((nt - now) / 1000) + pad)
    else
      redis.call('DEL', key)
    end
  end
end
return {1}
`

// luaRefundFixedWindow gives cost back to a fixed-window policy's keys,
// one per limit, in the fixed-window encoding (count × M + window index
// mod M): the count in force (now's window, or a later one, as the take
// scripts keep it) goes down by cost, not below 0; an older window's is
// left alone. INCRBY keeps the key's TTL.
//
//	ARGV[2]           cost
//	ARGV[1 + 2i]      the window of limit i
//	ARGV[2 + 2i]      its M
const luaRefundFixedWindow = luaNow + `
local cost = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  local w, m = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  local v = redis.call('GET', key)
  local x = v and tonumber(v)
  if x and x >= 0 then
    local ix = x % m
    local count = (x - ix) / m
    local diff = (math.floor(now / w) - ix) % m
    if diff >= m / 2 then diff = diff - m end
    if count > 0 and diff <= 0 then
      redis.call('INCRBY', key, -math.min(cost, count) * m)
    end
  end
end
return {1}
`

var (
	refundGCRA        = newScript(padded(luaRefundGCRA))
	refundFixedWindow = newScript(padded(luaRefundFixedWindow))
)

func init() { allScripts = append(allScripts, refundGCRA, refundFixedWindow) }

var _ storekit.Refunder = (*redisStore)(nil)

// Refund gives cost back to key under p (see storekit.Refunder), in one
// script call on the keys Take uses: what a core.CapacityLimit releases
// when an elastic take it found capacity for did not admit. It decides
// at the Redis server's time, or at now under [WithClientTime]. Only a
// Refundable (hard GCRA or fixed-window) policy can be refunded; errors
// as Take.
func (s *redisStore) Refund(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) error {
	if p == nil {
		return errors.New("redisstore: Refund: nil policy")
	}
	if !p.Refundable() {
		return fmt.Errorf("redisstore: policy %q cannot be refunded (only a hard GCRA or fixed-window policy can)", p.Name)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := s.policy(p)
	if err != nil {
		return err
	}
	if c.cal != nil {
		return fmt.Errorf("redisstore: policy %q: calendar limits are not refunded by Refund (an elastic policy's; calendar limits cannot be elastic): use core.Limiter.Refund", p.Name)
	}
	args := s.args(c, nil, key, now, cost)
	sc := refundGCRA
	if p.Algorithm == core.FixedWindow {
		sc = refundFixedWindow
	}
	args[1] = sc.shaArg
	for i, l := range p.Limits {
		if sc == refundGCRA {
			args = append(args, core.EmissionInterval(l))
		} else {
			args = append(args, l.Window.Microseconds(), fwModulus(capacity(l)+c.soft[i]))
		}
	}
	if _, err := sc.run(ctx, s.client, args); err != nil {
		return fmt.Errorf("redisstore: policy %q: refund: %w", p.Name, replyErr(err))
	}
	return nil
}
