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

// The Lua scripts port core's algorithms (core/algo.go, (*core.Policy).Decide)
// line by line. Redis's Lua computes on doubles; every quantity is an
// integer below 2^53 (µs since the epoch, counts below 2^31), so integer
// math is exact, and the one floating-point formula (the sliding counter's
// estimate) is evaluated in the same order as in Go: sum + oldest*((L-e)/L).
// Go does the per-policy arithmetic once (emission interval, effective
// capacity, bucket length) and passes it in ARGV.
//
// Five generic scripts, one per algorithm, serve any policy; the common
// shapes (one limit of any algorithm, several GCRA or fixed-window limits)
// have their own straight-line scripts further down, which read and write
// the same keys and encodings and reply in the same shape.
//
// Calling convention of the generic scripts:
//
//	KEYS[i]   state of limit i (all under one hash tag)
//	ARGV[1]   now in µs since the epoch, or "" for Redis TIME
//	ARGV[2]   cost (>= 0, clamped by Go to at most max capacity + 1)
//	ARGV[3]   "1" when denied requests count (Policy.CountDenied)
//	ARGV[4]   ms added to every TTL (rounding and clock slack)
//	ARGV[5]   elastic mode: "0" a hard policy; "1" an elastic policy's
//	          nominal take (on a denial, also evaluate the ceiling: the
//	          hint); "2" its elastic take (the limits raised to the ceiling)
//	ARGV[6..] STRIDE numbers per limit (see each algorithm); each script
//	          reads its elastic numbers (the ceiling's capacity and soft
//	          margin, SOFTE) when E, the elastic take, is set
//
// Reply: {allowed 0/1, binding limit index (0-based), remaining of the
// binding limit against its effective capacity (0 when denied; Go
// subtracts the soft overage), resetAfter µs, retryAfter µs (-1 = never),
// flag}: flag is 1, in mode "1", on a denial the ceiling would admit
// (core's Decision.ElasticRoom) and, in mode "2", on an admission above a
// nominal limit (a remaining count below the soft margin SOFTE: core's
// Decision.Elastic); else 0.
//
// Elastic policies (core.Policy.Elastic) always use these scripts: the
// ceiling is decided on the same keys in the same script call as the
// state it counts against.
//
// Every write sets the key's TTL to when its state is back to full (core's
// ExpiresAt) + ARGV[4] ms; a state that is already full is deleted; a key
// read without a TTL is given one.

// luaHead reads the arguments and defines the shared helpers.
const luaHead = `
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
if now < 0 then now = 0 end
if now > 4503599627370496 then now = 4503599627370496 end
local cost = tonumber(ARGV[2])
if cost < 0 then cost = 0 end
local always = ARGV[3] == '1'
local ttlpad = tonumber(ARGV[4])
local emode = ARGV[5]
local E = emode == '2'
local nl = #KEYS
local EVAL, IFOK, ALWAYS = 0, 1, 2
local dirty, existed, st = {}, {}, {}

-- integer division truncating toward zero, as Go's /
local function idiv(a, b)
  local q = a / b
  if q < 0 then return math.ceil(q) end
  return math.floor(q)
end

local P = {}
for k = 6, #ARGV do P[k - 5] = tonumber(ARGV[k]) end
local function arg(i, k)
  return P[(i - 1) * STRIDE + k]
end

local function fmt(x)
  return string.format('%d', x)
end
`

// luaTail runs the steps (Decide's single- and multi-limit paths), picks
// the binding limit (core's binds / nominalRemaining), persists and replies.
const luaTail = `
local vals = redis.call('MGET', unpack(KEYS))
for i = 1, nl do
  local v = vals[i]
  existed[i] = v ~= false
  st[i] = decode(i, v)
end

if E then SOFT = SOFTE end
local function nominal(rem, i)
  rem = rem - arg(i, SOFT)
  if rem < 0 then return 0 end
  return rem
end

local bind, bok, brem, breset, bretry
local over = false
if nl == 1 then
  local mode = IFOK
  if always then mode = ALWAYS end
  bind = 1
  bok, brem, breset, bretry = step(1, st[1], mode)
  over = bok and brem < arg(1, SOFT)
else
  local allok = true
  for i = 1, nl do
    local ok, rem, reset, retry = step(i, st[i], EVAL)
    if rem < arg(i, SOFT) then over = true end
    local take = bind == nil
    if not take then
      if ok ~= bok then
        take = not ok
      elseif not ok then
        if bretry == -1 then
          take = false
        else
          take = retry == -1 or retry > bretry
        end
      else
        local ra, rb = nominal(rem, i), nominal(brem, bind)
        take = ra < rb or (ra == rb and reset > breset)
      end
    end
    if take then
      bind, bok, brem, breset, bretry = i, ok, rem, reset, retry
    end
    allok = allok and ok
  end
  if allok or always then
    for i = 1, nl do
      local _, _, reset = step(i, st[i], ALWAYS)
      if i == bind then breset = reset end
    end
  end
  over = over and allok
end

-- the flag: the ceiling's room on a nominal denial (evaluated with the
-- elastic numbers, consuming nothing), or an elastic admission above a
-- nominal limit
local flag = 0
if emode == '1' and not bok then
  E = true
  flag = 1
  for i = 1, nl do
    if not step(i, st[i], EVAL) then flag = 0; break end
  end
  E = false
elseif E and over then
  flag = 1
end

for i = 1, nl do
  local exp = -1
  if dirty[i] then
    exp = expires(i, st[i])
  elseif existed[i] and redis.call('PTTL', KEYS[i]) == -1 then
    exp = expires(i, st[i])
  end
  if exp > now then
    local ttl = math.ceil((exp - now) / 1000) + ttlpad
    if dirty[i] then
      redis.call('SET', KEYS[i], encode(i, st[i]), 'PX', fmt(ttl))
    else
      redis.call('PEXPIRE', KEYS[i], fmt(ttl))
    end
  elseif exp ~= -1 and existed[i] then
    redis.call('DEL', KEYS[i])
  end
end

-- an elastic take may overdraw a token bucket: its remaining is then
-- below 0, which Go reports as 0 (the flag says it is above the limit)
local rem = 0
if bok and brem > 0 then rem = brem end
return {bok and 1 or 0, bind - 1, rem, breset, bretry, flag}
`

// luaGCRA: state "tat" (µs), a plain integer string. ARGV per limit:
// emission interval T, tolerance tau = capacity × T, soft overage, the
// ceiling's tolerance tauE (= tau for a hard policy; it also bounds the
// normalization of a clock step), the ceiling's soft margin.
const luaGCRA = `
local STRIDE, SOFT, SOFTE = 5, 3, 5
` + luaHead + `
local function decode(i, v)
  return {tonumber(v) or 0}
end
local function encode(i, s) return fmt(s[1]) end
local function expires(i, s) return s[1] end

local function step(i, s, mode)
  local t, tau, taue = arg(i, 1), arg(i, 2), arg(i, 4)
  if E then tau = taue end
  -- a tat more than 2×tauE ahead: the clock went back (nearer: a late caller)
  if s[1] - now > 2 * taue then s[1] = now + taue; dirty[i] = true end
  local tat = s[1]
  if tat < now then tat = now end
  local newtat = tat + cost * t
  if newtat - now <= tau then
    if mode ~= EVAL and cost > 0 then s[1] = newtat; dirty[i] = true end
    return true, idiv(tau - (newtat - now), t), newtat - now, 0
  end
  local rem = idiv(tau - (tat - now), t)
  if rem < 0 then rem = 0 end
  local reset, retry = tat - now, newtat - tau - now
  if cost * t > tau then retry = -1 end
  if mode == ALWAYS then
    s[1] = math.max(tat, math.min(newtat, now + tau)); dirty[i] = true
    reset = s[1] - now
  end
  return false, rem, reset, retry
end
` + luaTail

// luaTokenBucket: state (tokens, last). Stored as the integer string
// last*1000 + (capacity - tokens) while the deficit is below 1000 (an
// int-encoded Redis string, the smallest form), else "tokens:last" (tokens
// below 0 when an elastic policy overdrew the bucket). ARGV per limit: T,
// capacity, soft overage, the ceiling's overdraft (ceiling − capacity; 0
// for a hard policy), which the elastic take may spend.
const luaTokenBucket = `
local STRIDE, SOFT, SOFTE = 4, 3, 3
` + luaHead + `
local function decode(i, v)
  if not v then return {0, 0} end
  local capa = arg(i, 2)
  local c = string.find(v, ':', 1, true)
  if c then
    local tk, last = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
    if tk and last then return {tk, last} end
    return {0, 0}
  end
  if #v < 4 then return {0, 0} end
  local last, def = tonumber(string.sub(v, 1, -4)), tonumber(string.sub(v, -3))
  if not last or not def then return {0, 0} end
  return {capa - def, last}
end
local function encode(i, s)
  local def = arg(i, 2) - s[1]
  if def >= 0 and def < 1000 and s[2] > 0 then
    return fmt(s[2]) .. string.format('%03d', def)
  end
  return fmt(s[1]) .. ':' .. fmt(s[2])
end
local function expires(i, s)
  if s[2] == 0 then return 0 end
  return s[2] + (arg(i, 2) - s[1]) * arg(i, 1)
end

local function step(i, s, mode)
  local t, capa, dmax = arg(i, 1), arg(i, 2), arg(i, 4)
  local debt = 0
  if E then debt = dmax end
  local tokens, last = s[1], s[2]
  if last == 0 then
    tokens, last = capa, now
  elseif last - now > (tokens + dmax + capa) * t then
    last = now + math.max(tokens, 0) * t
    s[2] = last; dirty[i] = true
  elseif now > last then
    local n = idiv(now - last, t)
    if tokens + n >= capa then
      tokens, last = capa, now
    else
      tokens = tokens + n
      last = last + n * t
    end
  end
  if cost <= tokens + debt then
    tokens = tokens - cost
    if mode ~= EVAL and cost > 0 then s[1], s[2] = tokens, last; dirty[i] = true end
    return true, tokens, math.max(0, last + (capa - tokens) * t - now), 0
  end
  local reset = math.max(0, last + (capa - tokens) * t - now)
  local retry = last + (cost - tokens - debt) * t - now
  if cost > capa + debt then retry = -1 end
  if mode == ALWAYS then
    s[1], s[2] = 0, last; dirty[i] = true
    reset = math.max(0, last + capa * t - now)
  end
  return false, tokens, reset, retry
end
` + luaTail

// luaFixedWindow: state (window index mod M, count), core's packed word
// (core takes the index mod 2^33), stored as the integer count × M +
// index. M is 2^33 when (2 × capacity + 2) × 2^33 fits in 2^53, else the
// largest power of two that does (fwModulus in Go), so the value and the
// sum an INCRBY of c × M makes of it are exact in Lua's doubles. A
// capacity of 2^19 or more therefore tells windows apart mod M (at least
// 2^21, for the largest capacity, 2^31 − 1) instead of 2^33: the same
// decisions as core unless a state outlives M/2 windows, which its TTL
// (the window's end) does not allow.
// ARGV per limit: window W, capacity, soft, M, the ceiling's capacity and
// soft margin (= capacity, soft for a hard policy; M is then worked out
// from the ceiling, which bounds the count).
const luaFixedWindow = `
local STRIDE, SOFT, SOFTE = 6, 3, 6
` + luaHead + `
local function decode(i, v)
  if not v then return {0, 0} end
  local x = tonumber(v)
  if not x or x < 0 then return {0, 0} end
  local m = arg(i, 4)
  local ix = x % m
  return {ix, (x - ix) / m}
end
local function encode(i, s)
  return fmt(s[2] * arg(i, 4) + s[1])
end

-- the window in force at now and its count (core: a stored window later
-- than now's stays in force)
local function current(i, s, w)
  local idx = math.floor(now / w)
  local count = s[2]
  if count ~= 0 then
    local m = arg(i, 4)
    local diff = (idx - s[1]) % m
    if diff >= m / 2 then diff = diff - m end
    if diff > 0 then count = 0 else idx = idx - diff end
  end
  return idx, count
end

local function expires(i, s)
  if s[2] == 0 then return 0 end
  local w = arg(i, 1)
  local idx = current(i, s, w)
  return (idx + 1) * w
end

local function step(i, s, mode)
  local w, capa, m = arg(i, 1), arg(i, 2), arg(i, 4)
  if E then capa = arg(i, 5) end
  local idx, count = current(i, s, w)
  local nidx = math.floor(now / w)
  if idx > nidx + 1 then
    -- a window more than one after now's (the clock went back): its count
    -- is carried into now's window (the next window stays in force: a
    -- caller that read the clock before a concurrent one rolled it over)
    idx = nidx; s[1] = idx % m; dirty[i] = true
  end
  local fin = (idx + 1) * w
  if count + cost <= capa then
    if mode ~= EVAL and cost > 0 then
      s[1], s[2] = idx % m, count + cost; dirty[i] = true
    end
    return true, capa - count - cost, fin - now, 0
  end
  local retry = fin - now
  if cost > capa then retry = -1 end
  if mode == ALWAYS then
    s[1], s[2] = idx % m, math.min(count + cost, capa); dirty[i] = true
  end
  return false, capa - count, fin - now, retry
end
` + luaTail

// luaSlidingLog: state = core's ring, as one string: the head (an 8-byte
// little-endian integer), then the ring's slots from slot 0 (8-byte
// little-endian timestamps+1); slots past the end of the string were never
// written (0). Stamps are max(now, newest), so the ring is sorted from the
// head and searched by binary search. A ring holding more than 256 slots
// (2 KB) is never read or written whole: each probe is a GETRANGE of one
// slot and each write a SETRANGE of the slots written (in chunks of 1024),
// so a decision moves O(log C + cost) bytes (a denied one O(log C)), not
// the whole log. Smaller rings are read with GET and written with SET. ARGV per limit: window W,
// capacity C, soft, the ceiling's capacity CE (the ring's size; = C for a
// hard policy) and soft margin. Also serves one limit (luaSlidingLog1 is
// the same body with the single-limit ARGV).
const luaSlidingLog = `
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
if now < 0 then now = 0 end
if now > 4503599627370496 then now = 4503599627370496 end
local cost = tonumber(ARGV[2])
if cost < 0 then cost = 0 end
local always = ARGV[3] == '1'
local pad = tonumber(ARGV[4])
local emode = ARGV[5]
local E = emode == '2'
local nl = #KEYS
local W, CAP, SOFT, CAPE, SOFTE = {}, {}, {}, {}, {}
for i = 1, nl do
  local b = 5 * i
  W[i], CAP[i], SOFT[i] = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  CAPE[i], SOFTE[i] = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5])
end
` + luaLogBody

// luaLogBody is the sliding log's decision over nl limits (luaSlidingLog).
const luaLogBody = `
local EVAL, IFOK, ALWAYS = 0, 1, 2

-- L[i]: limit i's ring. h head, m slots stored, c capacity, memo the
-- slots read so far, newest the newest slot once known after a write. A
-- ring that holds at most WHOLE slots (2 KB) is read with GET into str,
-- updated in Lua and written with SET (whole); a larger one is read slot
-- by slot with GETRANGE and written with SETRANGE, and so is one that a
-- write grows past WHOLE slots.
local WHOLE = 256
local L = {}
for i = 1, nl do
  local key, c = KEYS[i], CAPE[i] -- the ring holds the ceiling
  local s = {key = key, c = c, h = 0, m = 0, m0 = 0, memo = {}, dirty = false, existed = false, whole = true}
  local len
  if c > WHOLE then len = redis.call('STRLEN', key) end
  if c <= WHOLE or len <= 8 + 8 * WHOLE then
    local v = redis.call('GET', key)
    if v then s.str, len = v, #v else s.str, len = '', 0 end
  else
    s.whole = false
  end
  if len > 0 then
    s.existed = true
    local h = -1
    if len >= 16 and len % 8 == 0 and (len - 8) / 8 <= c then
      if s.whole then h = struct.unpack('<i8', s.str) else h = struct.unpack('<i8', redis.call('GETRANGE', key, 0, 7)) end
    end
    if h >= 0 and h < c then
      s.h, s.m = h, (len - 8) / 8
      s.m0 = s.m
    else
      -- not this layout: start afresh
      redis.call('DEL', key)
      s.existed = false
      s.str = ''
    end
  end
  L[i] = s
end

-- ring slot j (0-based); slots never written are 0
local function slot(s, j)
  if j >= s.m then return 0 end
  if s.whole then return (struct.unpack('<i8', s.str, 9 + 8 * j)) end
  local x = s.memo[j]
  if x then return x end
  x = struct.unpack('<i8', redis.call('GETRANGE', s.key, 8 + 8 * j, 15 + 8 * j))
  s.memo[j] = x
  return x
end
-- the i-th oldest slot
local function at(s, i) return slot(s, (s.h + i) % s.c) end

-- write k copies of v at ring slots j..j+k-1 (j + k <= c); a large ring
-- is written by SETRANGE in chunks of at most 1024 slots, so that no large
-- string is ever built in Lua (building one costs far more than copying it)
local function put(s, j, k, v)
  if s.whole and j + k > WHOLE then
    -- the ring grows past WHOLE slots: write what Lua holds, go on by range
    if s.dirty then redis.call('SET', s.key, struct.pack('<i8', s.h) .. string.sub(s.str, 9)) end
    s.whole, s.memo = false, {}
  end
  if s.whole then
    local str = s.str
    if #str < 8 + 8 * j then str = str .. string.rep('\0', 8 + 8 * j - #str) end
    s.str = string.sub(str, 1, 8 + 8 * j) .. string.rep(struct.pack('<i8', v), k) .. string.sub(str, 9 + 8 * (j + k))
  else
    local chunk = string.rep(struct.pack('<i8', v), math.min(k, 1024))
    local off, n = 8 + 8 * j, k
    while n >= 1024 do
      redis.call('SETRANGE', s.key, off, chunk)
      off, n = off + 8192, n - 1024
    end
    if n > 0 then redis.call('SETRANGE', s.key, off, string.sub(chunk, 1, 8 * n)) end
  end
  if j + k > s.m then s.m = j + k end
  s.memo = {}
  s.dirty = true
end
-- write k (<= c) copies of v at the i-th oldest slots on
local function fill(s, i, k, v)
  local j = (s.h + i) % s.c
  local a = math.min(k, s.c - j)
  put(s, j, a, v)
  if k > a then put(s, 0, k - a, v) end
end
-- first position (oldest first) whose value is > v; c when none
local function search(s, v)
  local lo, hi = 0, s.c
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if at(s, mid) > v then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- entries stamped more than a window after now (the clock went back) are
-- restamped now; nearer ones stay (a caller that read the clock first)
for i = 1, nl do
  local s = L[i]
  if at(s, s.c - 1) - 1 - now > W[i] then
    local p = search(s, now + 1)
    fill(s, p, s.c - p, now + 1)
    s.newest = now + 1
  end
end

local function step(i, mode)
  local s, w = L[i], W[i]
  local c = s.c
  local capa = CAP[i]
  if E then capa = CAPE[i] end
  local cut = now - w + 1
  if cut < 0 then cut = 0 end
  local lo = search(s, cut)
  local inw = c - lo
  local newest = at(s, c - 1) - 1
  if newest < 0 then newest = 0 end
  local stamp = math.max(now, newest)
  if inw + cost <= capa then
    if mode ~= EVAL and cost > 0 then
      fill(s, 0, cost, stamp + 1)
      s.h, s.newest = (s.h + cost) % c, stamp + 1
    end
    local reset = 0
    if cost > 0 then
      reset = stamp + w - now
    elseif inw > 0 then
      reset = newest + w - now
    end
    return true, capa - inw - cost, reset, 0
  end
  local reset, retry = 0, -1
  if inw > 0 then reset = newest + w - now end
  if cost <= capa then
    retry = at(s, lo + inw + cost - capa - 1) - 1 + w - now
  end
  if mode == ALWAYS then
    local k = math.min(cost, capa)
    fill(s, 0, k, stamp + 1)
    s.h, s.newest = (s.h + k) % c, stamp + 1
    reset = stamp + w - now
  end
  return false, math.max(0, capa - inw), reset, retry
end

if E then SOFT = SOFTE end
local bind, bok, brem, breset, bretry
local over = false
if nl == 1 then
  local mode = IFOK
  if always then mode = ALWAYS end
  bind = 1
  bok, brem, breset, bretry = step(1, mode)
  over = bok and brem < SOFT[1]
else
  local allok = true
  for i = 1, nl do
    local ok, rem, reset, retry = step(i, EVAL)
    if rem < SOFT[i] then over = true end
    local take = bind == nil
    if not take then
      if ok ~= bok then
        take = not ok
      elseif not ok then
        if bretry == -1 then
          take = false
        else
          take = retry == -1 or retry > bretry
        end
      else
        local ra, rb = math.max(0, rem - SOFT[i]), math.max(0, brem - SOFT[bind])
        take = ra < rb or (ra == rb and reset > breset)
      end
    end
    if take then
      bind, bok, brem, breset, bretry = i, ok, rem, reset, retry
    end
    allok = allok and ok
  end
  if allok or always then
    for i = 1, nl do
      local _, _, reset = step(i, ALWAYS)
      if i == bind then breset = reset end
    end
  end
  over = over and allok
end

local flag = 0
if emode == '1' and not bok then
  E = true
  flag = 1
  for i = 1, nl do
    if not step(i, EVAL) then flag = 0; break end
  end
  E = false
elseif E and over then
  flag = 1
end

for i = 1, nl do
  local s = L[i]
  if s.dirty or (s.existed and redis.call('PTTL', s.key) == -1) then
    local exp = s.newest or at(s, s.c - 1)
    if exp ~= 0 then exp = exp - 1 + W[i] end
    if exp > now then
      local ttl = string.format('%d', math.ceil((exp - now) / 1000) + pad)
      if s.dirty and s.whole then
        redis.call('SET', s.key, struct.pack('<i8', s.h) .. string.sub(s.str, 9), 'PX', ttl)
      else
        if s.dirty then redis.call('SETRANGE', s.key, 0, struct.pack('<i8', s.h)) end
        if s.dirty and s.m0 < s.c and s.m == s.c then
          -- the ring just filled: SETRANGE's growth left spare room in
          -- the string; rewrite it once at its exact size
          redis.call('SET', s.key, redis.call('GET', s.key), 'PX', ttl)
        else
          redis.call('PEXPIRE', s.key, ttl)
        end
      end
    elseif s.existed or s.dirty then
      redis.call('DEL', s.key)
    end
  end
end

-- an elastic take may overdraw a token bucket: its remaining is then
-- below 0, which Go reports as 0 (the flag says it is above the limit)
local rem = 0
if bok and brem > 0 then rem = brem end
return {bok and 1 or 0, bind - 1, rem, breset, bretry, flag}
`

// luaSlidingCounter: state (current bucket index, N+1 counts), as one
// string: an 8-byte little-endian index, then N+1 counts of WIDTH bytes
// (1, 2 or 4, the smallest that holds the capacity, or an elastic
// policy's ceiling). ARGV per limit: buckets N, bucket length L, capacity,
// soft, width, the ceiling's capacity and soft margin (= capacity, soft
// for a hard policy).
const luaSlidingCounter = `
local STRIDE, SOFT, SOFTE = 7, 4, 7
` + luaHead + `
local function decode(i, v)
  local n, width = arg(i, 1), arg(i, 5)
  local slots = n + 1
  local s = {cur = 0, cnt = {}}
  if v and #v == 8 + slots * width then
    local vals = {struct.unpack('<i8' .. string.rep('I' .. width, slots), v)}
    s.cur = vals[1]
    for j = 1, slots do s.cnt[j] = vals[j + 1] end
  else
    for j = 1, slots do s.cnt[j] = 0 end
  end
  return s
end
local function encode(i, s)
  local n, width = arg(i, 1), arg(i, 5)
  return struct.pack('<i8' .. string.rep('I' .. width, n + 1), s.cur, unpack(s.cnt))
end
local function expires(i, s)
  local n, bl = arg(i, 1), arg(i, 2)
  for j = 1, n + 1 do
    if s.cnt[j] ~= 0 then return (s.cur + n + 1) * bl end
  end
  return 0
end

local function estimate(sum, oldest, bl, e)
  local w = (bl - e) / bl
  return sum + oldest * w
end

local function step(i, s, mode)
  local n, bl, capa = arg(i, 1), arg(i, 2), arg(i, 3)
  if E then capa = arg(i, 6) end
  local slots = n + 1
  local cnt = s.cnt
  local cur = s.cur
  local function bucket(j)
    if j > cur or j <= cur - slots or j < 0 then return 0 end
    return cnt[j % slots + 1]
  end
  local idx = math.floor(now / bl)
  local e = now - idx * bl
  if idx < cur and cur - idx <= n then
    -- a caller that read the clock before a concurrent one moved on:
    -- decide at the start of the stored current bucket
    idx, e = cur, 0
  elseif idx < cur then
    -- the clock went back: the window moves back to now's bucket
    local d, old = (cur - idx) % slots, {}
    for j = 1, slots do old[j] = cnt[j] end
    for j = 0, slots - 1 do cnt[j + 1] = old[(j + d) % slots + 1] end
    s.cur, cur = idx, idx
    dirty[i] = true
  end
  local sum = 0
  for j = idx - n + 1, idx do sum = sum + bucket(j) end
  local oldest = bucket(idx - n)
  local est = estimate(sum, oldest, bl, e)
  local lim = capa - cost
  local ok, rem, reset, retry = false, 0, 0, 0
  if est <= lim then
    ok = true
    rem = math.max(0, math.floor(capa - (est + cost)))
  else
    rem = math.max(0, math.floor(capa - est))
    retry = -1
    if cost <= capa then
      -- the earliest instant the estimate is within lim (core's counterRetry);
      -- window sums are kept incrementally, which is exact for integers
      local at = (idx + n + 1) * bl
      local ws = sum
      for b = idx, idx + n + 1 do
        if b > idx then ws = ws + bucket(b) - bucket(b - n) end
        if ws <= lim then
          local old = bucket(b - n)
          local start = 0
          if b == idx then start = e end
          if estimate(ws, old, bl, start) <= lim then
            at = b * bl + start
            break
          end
          local x = math.max(start, bl - math.floor((lim - ws) * bl / old))
          while x > start and estimate(ws, old, bl, x - 1) <= lim do x = x - 1 end
          while x < bl and estimate(ws, old, bl, x) > lim do x = x + 1 end
          if x < bl then
            at = b * bl + x
            break
          end
        end
      end
      retry = at - now
    end
  end
  local write = mode == ALWAYS or (mode == IFOK and ok)
  local a = cost
  if not ok then a = math.min(cost, capa) end
  if write and a > 0 then
    if idx ~= cur then
      for j = math.max(cur + 1, idx - n), idx do cnt[j % slots + 1] = 0 end
      s.cur, cur = idx, idx
    end
    local k = idx % slots + 1
    if ok then
      cnt[k] = cnt[k] + a
    else
      cnt[k] = math.min(cnt[k] + a, capa)
    end
    dirty[i] = true
  end
  if (ok and cost > 0) or (write and a > 0) then
    reset = (idx + n + 1) * bl - now
  else
    for j = idx, idx - n, -1 do
      if bucket(j) ~= 0 then
        reset = (j + n + 1) * bl - now
        break
      end
    end
  end
  return ok, rem, reset, retry
end
` + luaTail

// The single-limit scripts below are the common case written out as
// straight-line Lua: no helper closures, no per-call tables, one GET, at
// most one write (SET ... PX, or PEXPIRE/DEL to repair a key without a
// TTL), and the TTL padding compiled in. They read and write exactly the
// encodings of the generic scripts above, and reply in the same shape, but
// take their own ARGV:
//
//	ARGV[1]   now in µs since the epoch, or "" for Redis TIME
//	ARGV[2]   cost (>= 0, clamped by Go to at most capacity + 1)
//	ARGV[3..] the limit's numbers (see each script), then "1" when denied
//	          requests count
//
// The TTL pad is ttlRoundPad under Redis TIME and ttlRoundPad + clientTimeSlack
// when now is passed in (WithClientTime), exactly Store.ttlPad.

// luaNow sets now (µs) and pad (ms added to every TTL).
const luaNow = `
local now, pad = ARGV[1], $PADC
if now == '' then
  local t = redis.call('TIME')
  now, pad = t[1] * 1000000 + t[2], $PADS
else
  now = tonumber(now)
  if now < 0 then now = 0 end
  if now > 4503599627370496 then now = 4503599627370496 end
end
`

// luaBind is the binding-limit choice of the straight-line multi-limit
// scripts (luaGCRAN, luaFixedWindowN), in a loop over limit i with its
// ok, rem, reset, retry and soft: core's rule (a denying limit over an
// allowing one; among denials the longest wait, Never first; among
// allowances the least remaining beyond the soft overage, then the
// latest reset). It updates bind, bok, brem, breset, bretry, bsoft and
// allok.
const luaBind = `  local take = bind == nil
  if not take then
    if ok ~= bok then
      take = not ok
    elseif not ok then
      if bretry == -1 then
        take = false
      else
        take = retry == -1 or retry > bretry
      end
    else
      local ra, rb = rem - soft, brem - bsoft
      if ra < 0 then ra = 0 end
      if rb < 0 then rb = 0 end
      take = ra < rb or (ra == rb and reset > breset)
    end
  end
  if take then
    bind, bok, brem, breset, bretry, bsoft = i, ok, rem, reset, retry, soft
  end
  allok = allok and ok
`

// luaGCRA1: GCRA, one limit. ARGV[3] emission interval T, ARGV[4]
// tolerance tau = capacity × T, ARGV[5] count denied. Reply remaining is
// against the effective capacity (Go subtracts the soft overage).
// Numbers go to redis.call as Lua numbers, not string.format('%d'):
// Redis writes a number argument with %.17g, which for these integers
// (below 2^53, so below 10^17) is exactly their decimal digits, the same
// bytes, a few percent less of the script's CPU.
const luaGCRA1 = luaNow + `
local cost, t, tau = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local key = KEYS[1]
local v = redis.call('GET', key)
local old = 0
if v then old = tonumber(v) or 0 end
-- a tat beyond now + 2×tau (the clock went back) is normalized to now + tau;
-- nearer, it stays (a caller that read the clock before a concurrent one)
local fix = old - now > 2 * tau
if fix then old = now + tau end
local tat = old
if tat < now then tat = now end
local newtat = tat + cost * t
if newtat - now <= tau then
  if cost > 0 then
    redis.call('SET', key, newtat, 'PX', math.ceil((newtat - now) / 1000) + pad)
  elseif fix then
    redis.call('SET', key, old, 'PX', math.ceil((old - now) / 1000) + pad)
  elseif v and redis.call('PTTL', key) == -1 then
    if old > now then
      redis.call('PEXPIRE', key, math.ceil((old - now) / 1000) + pad)
    else
      redis.call('DEL', key)
    end
  end
  return {1, 0, math.floor((tau - newtat + now) / t), newtat - now, 0}
end
local retry = newtat - tau - now
if cost * t > tau then retry = -1 end
if ARGV[5] == '1' then
  local s = newtat
  if s > now + tau then s = now + tau end
  if s < tat then s = tat end
  if s > now then
    redis.call('SET', key, s, 'PX', math.ceil((s - now) / 1000) + pad)
  elseif v then
    redis.call('DEL', key)
  end
  return {0, 0, 0, s - now, retry}
end
if fix then
  redis.call('SET', key, old, 'PX', math.ceil((old - now) / 1000) + pad)
elseif v and redis.call('PTTL', key) == -1 then
  if old > now then
    redis.call('PEXPIRE', key, math.ceil((old - now) / 1000) + pad)
  else
    redis.call('DEL', key)
  end
end
return {0, 0, 0, tat - now, retry}
`

// luaTokenBucket1: token bucket, one limit. ARGV[3] T, ARGV[4] capacity,
// ARGV[5] count denied.
const luaTokenBucket1 = luaNow + `
local cost, t, capa = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local key = KEYS[1]
local v = redis.call('GET', key)
local tokens, last = 0, 0
if v then
  local ls, def = string.match(v, '^(%d+)(%d%d%d)$')
  if ls then
    tokens, last = capa - tonumber(def), tonumber(ls)
  else
    local tk, ls2 = string.match(v, '^(-?%d+):(-?%d+)$')
    if tk then tokens, last = tonumber(tk), tonumber(ls2) end
  end
end
local otokens, olast = tokens, last
local fix = false
if last == 0 then
  tokens, last = capa, now
elseif last - now > (tokens + capa) * t then
  last, fix = now + tokens * t, true
elseif now > last then
  local n = math.floor((now - last) / t)
  if tokens + n >= capa then
    tokens, last = capa, now
  else
    tokens = tokens + n
    last = last + n * t
  end
end
local ok, reset, retry = 1, 0, 0
local wt = nil -- the tokens to store, when the state is written
if cost <= tokens then
  tokens = tokens - cost
  if cost > 0 or fix then wt = tokens end
  reset = last + (capa - tokens) * t - now
else
  ok = 0
  reset = last + (capa - tokens) * t - now
  retry = last + (cost - tokens) * t - now
  if cost > capa then retry = -1 end
  if fix then wt = tokens end
  if ARGV[5] == '1' then
    wt = 0
    reset = last + capa * t - now
  end
end
if reset < 0 then reset = 0 end
local rem = tokens
if ok == 0 then rem = 0 end
if wt then
  local rtokens = wt
  local exp = 0
  if last ~= 0 then exp = last + (capa - rtokens) * t end
  if exp > now then
    local def, val = capa - rtokens
    if def >= 0 and def < 1000 and last > 0 then
      val = string.format('%d%03d', last, def)
    else
      val = string.format('%d:%d', rtokens, last)
    end
    redis.call('SET', key, val, 'PX', string.format('%d', math.ceil((exp - now) / 1000) + pad))
  elseif v then
    redis.call('DEL', key)
  end
elseif v and redis.call('PTTL', key) == -1 then
  local exp = 0
  if olast ~= 0 then exp = olast + (capa - otokens) * t end
  if exp > now then
    redis.call('PEXPIRE', key, string.format('%d', math.ceil((exp - now) / 1000) + pad))
  else
    redis.call('DEL', key)
  end
end
return {ok, 0, rem, reset, retry}
`

// luaFixedWindow1: fixed window, one limit. ARGV[3] window W, ARGV[4]
// capacity, ARGV[5] count denied, ARGV[6] M. The state is
// luaFixedWindow's: the integer count × M + window index mod M.
//
// The common case is one command: a request of cost c adds c × M with
// INCRBY, which adds c to the count and keeps the window index and the
// TTL the window's first write set (its end + pad). When the value before
// the add held a count of the window in force and the sum is within the
// capacity, that is the decision; over it, the add is taken back (or
// trimmed to the capacity when denied requests count) by a second
// INCRBY. Anything else (no key, an earlier window, a clock gone back, a
// peek, a value that is not an integer) takes the general path from the
// value before the add, which rewrites the key with SET ... PX or takes
// the add back. The in-place path does not read the TTL: a key left
// without one (PERSIST) gets it back with the key's next whole write (a
// peek, a denial that counts nothing, or the first decision of a later
// window).
//
// Under Redis TIME the in-place path reads the clock from the key itself
// instead of calling TIME (the dearest command of the script): the key
// expires at its window's end E plus the pad, to the millisecond (every
// write sets PX to ceil((E − now)/1000) + pad, E a whole millisecond),
// so PTTL = E + pad − now, up to the millisecond that may tick between
// TIME and the write. A PTTL within the window's length of E and at least
// 2 ms plus the client-time pad's slack (1 s) before it proves the key's
// window is now's even when a WithClientTime server wrote the key (its
// pad is 1 s longer: without the slack, its key of a window just ended
// would pass for the current one); the reset is then (PTTL − pad) ms, at
// most 2 ms more than the exact figure on a key a Redis-TIME server wrote
// (a RetryAfter never early). A window that is not a whole number of
// milliseconds, the last second of a window, and a window of 1 s or less
// take the TIME path.
const luaFixedWindow1 = `
local cost, w, capa, m = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local key = KEYS[1]
local now, pad = ARGV[1], $PADC
if now ~= '' then
  now = tonumber(now)
  if now < 0 then now = 0 end
  if now > 4503599627370496 then now = 4503599627370496 end
end
local v, added = false, false
if cost > 0 then
  -- a cost of 1 adds M's text: a number argument is turned into text on
  -- every call, a tenth of the script's time
  local inc = cost * m
  if cost == 1 then inc = tostring(ARGV[6]) end
  local x = redis.pcall('INCRBY', key, inc)
  if type(x) == 'number' then
    local ix = x % m
    local count = (x - ix) / m - cost
    if count > 0 then
      local reset
      if now == '' then
        if w % 1000 == 0 then
          local ttl = redis.call('PTTL', key)
          if ttl >= $PADC + 2 and ttl <= $PADS + w / 1000 - 1 then reset = (ttl - $PADS) * 1000 end
        end
      else
        local nidx = math.floor(now / w)
        local cur = nidx % m
        if ix == cur then
          reset = (nidx + 1) * w - now
        elseif ix == (cur + 1) % m then
          reset = (nidx + 2) * w - now
        end
      end
      if reset then
        if count + cost <= capa then
          return {1, 0, capa - count - cost, reset, 0}
        end
        local retry, back = reset, cost
        if cost > capa then retry = -1 end
        if ARGV[5] == '1' then back = count + cost - capa end
        if back > 0 then redis.call('INCRBY', key, -back * m) end
        return {0, 0, 0, reset, retry}
      end
    end
    v, added = x - cost * m, true
  end
end
if now == '' then
  local t = redis.call('TIME')
  now, pad = t[1] * 1000000 + t[2], $PADS
end
local ix, count = 0, 0
if added then
  ix = v % m
  count = (v - ix) / m
else
  v = redis.call('GET', key)
  local x = v and tonumber(v)
  if x and x >= 0 then
    ix = x % m
    count = (x - ix) / m
  end
end
local stored = count
local idx = math.floor(now / w)
local fix = false
if count ~= 0 then
  local diff = (idx - ix) % m
  if diff >= m / 2 then diff = diff - m end
  -- a window after now's (the clock went back): its count is carried into now's;
  -- the next window stays in force (a caller that read the clock before
  -- a concurrent one rolled it over)
  if diff > 0 then count = 0 elseif diff == -1 then idx = idx + 1 elseif diff < -1 then fix = true end
end
local reset = (idx + 1) * w - now
local ok, rem, retry, n = 1, 0, 0, -1
if count + cost <= capa then
  rem = capa - count - cost
  if cost > 0 then n = count + cost end
else
  ok, retry = 0, reset
  if cost > capa then retry = -1 end
  if ARGV[5] == '1' then
    n = count + cost
    if n > capa then n = capa end
  end
end
if n < 0 and fix then n = count end
if n >= 0 then
  redis.call('SET', key, n * m + idx % m, 'PX', math.ceil(reset / 1000) + pad)
elseif added then
  -- nothing to write: take the add back
  if v == 0 then
    redis.call('DEL', key)
  else
    redis.call('INCRBY', key, -cost * m)
  end
elseif v and redis.call('PTTL', key) == -1 then
  if stored ~= 0 then
    redis.call('PEXPIRE', key, math.ceil(reset / 1000) + pad)
  else
    redis.call('DEL', key)
  end
end
return {ok, 0, rem, reset, retry}
`

// luaSlidingLog1: sliding log, one limit: luaSlidingLog's body (and
// encoding) with the single-limit ARGV: ARGV[3] window W, ARGV[4]
// capacity C, ARGV[5] count denied.
const luaSlidingLog1 = luaNow + `
local cost, always, nl = tonumber(ARGV[2]), ARGV[5] == '1', 1
local W, CAP, SOFT = {tonumber(ARGV[3])}, {tonumber(ARGV[4])}, {0}
local CAPE, SOFTE, emode, E = CAP, SOFT, '0', false
` + luaLogBody

// luaSlidingCounter1: sliding counter, one limit (the encoding of
// luaSlidingCounter). ARGV[3] buckets N, ARGV[4] bucket length L, ARGV[5]
// capacity, ARGV[6] count width, ARGV[7] count denied, ARGV[8] the state's
// struct format ("<i8" then N+1 "I<width>", built once in Go). The window
// sum reads the stored counts in one loop; the estimate is evaluated as
// in core, sum + oldest*((L-e)/L).
const luaSlidingCounter1 = luaNow + `
local cost, n, bl, capa, width = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local slots = n + 1
local key = KEYS[1]
local v = redis.call('GET', key)
local cnt, cur = nil, 0
if v and #v == 8 + slots * width then
  cnt = {struct.unpack(ARGV[8], v)}
  cur = cnt[1]
end
-- bucket j's count: slot j mod (N+1), while j is one of the N+1 latest
local function bucket(j)
  if not cnt or j > cur or j <= cur - slots or j < 0 then return 0 end
  return cnt[j % slots + 2]
end
local function estimate(sum, oldest, e)
  local w = (bl - e) / bl
  return sum + oldest * w
end
local idx = math.floor(now / bl)
local e = now - idx * bl
local fix = false
if cnt and idx < cur and cur - idx <= n then
  -- a caller that read the clock before a concurrent one moved on:
  -- decide at the start of the stored current bucket
  idx, e = cur, 0
elseif cnt and idx < cur then
  -- the clock went back: the window moves back to now's bucket
  local d, old = (cur - idx) % slots, {unpack(cnt, 2, slots + 1)}
  for j = 0, slots - 1 do cnt[j + 2] = old[(j + d) % slots + 1] end
  cur, fix = idx, true
end
local sum = 0
if cnt then
  local a, b = idx - n + 1, idx
  if a < cur - slots + 1 then a = cur - slots + 1 end
  if a < 0 then a = 0 end
  if b > cur then b = cur end
  for j = a, b do sum = sum + cnt[j % slots + 2] end
end
local oldest = bucket(idx - n)
local est = estimate(sum, oldest, e)
local lim = capa - cost
local ok, rem, reset, retry = 0, 0, 0, 0
if est <= lim then
  ok = 1
  rem = math.floor(capa - (est + cost))
  if rem < 0 then rem = 0 end
else
  retry = -1
  if cost <= capa then
    local at = (idx + n + 1) * bl
    local ws, first = sum, idx
    if ws > lim and cnt then
      -- skip the segments whose complete buckets alone exceed lim, one
      -- leaving bucket each (the buckets after idx are empty)
      local lo = cur - slots + 1
      if lo < 0 then lo = 0 end
      repeat
        first = first + 1
        local j = first - n
        if j <= cur and j >= lo then ws = ws - cnt[j % slots + 2] end
      until ws <= lim or first > idx + n
    end
    for b = first, idx + n + 1 do
      if b > first then ws = ws + bucket(b) - bucket(b - n) end
      if ws <= lim then
        local old = bucket(b - n)
        local start = 0
        if b == idx then start = e end
        if estimate(ws, old, start) <= lim then
          at = b * bl + start
          break
        end
        local x = math.max(start, bl - math.floor((lim - ws) * bl / old))
        while x > start and estimate(ws, old, x - 1) <= lim do x = x - 1 end
        while x < bl and estimate(ws, old, x) > lim do x = x + 1 end
        if x < bl then
          at = b * bl + x
          break
        end
      end
    end
    retry = at - now
  end
end
local add = cost
if ok == 0 and add > capa then add = capa end
if (ok == 1 or ARGV[7] == '1') and add > 0 then
  if not cnt then
    cnt = {0}
    for s = 2, slots + 1 do cnt[s] = 0 end
  end
  if idx ~= cur then
    for j = math.max(cur + 1, idx - n), idx do cnt[j % slots + 2] = 0 end
    cur = idx
  end
  local k = idx % slots + 2
  local c2 = cnt[k] + add
  if ok == 0 and c2 > capa then c2 = capa end
  cnt[k] = c2
  reset = (idx + n + 1) * bl - now
  redis.call('SET', key, struct.pack(ARGV[8], cur, unpack(cnt, 2, slots + 1)),
    'PX', string.format('%d', math.ceil(reset / 1000) + pad))
else
  for j = idx, idx - n, -1 do
    if bucket(j) ~= 0 then
      reset = (j + n + 1) * bl - now
      break
    end
  end
  if fix or (v and redis.call('PTTL', key) == -1) then
    local exp = 0
    if cnt then
      for s = 2, slots + 1 do
        if cnt[s] ~= 0 then
          exp = (cur + n + 1) * bl
          break
        end
      end
    end
    if exp > now then
      local ttl = string.format('%d', math.ceil((exp - now) / 1000) + pad)
      if fix then
        redis.call('SET', key, struct.pack(ARGV[8], cur, unpack(cnt, 2, slots + 1)), 'PX', ttl)
      else
        redis.call('PEXPIRE', key, ttl)
      end
    else
      redis.call('DEL', key)
    end
  end
end
if ok == 0 then rem = 0 end
return {ok, 0, rem, reset, retry}
`

// luaGCRAN: GCRA, two or more limits (KEYS[i] is limit i's tat, as in
// luaGCRA). ARGV[3] count denied, then per limit: T, tau, soft overage.
// Decide's multi-limit path written out: one MGET, pass 1 evaluates every
// limit and picks the binding one (core's binds), pass 2 consumes in all
// of them when all allow (or when denied requests count).
const luaGCRAN = luaNow + `
local A = {} for k = 3, #ARGV do A[k] = tonumber(ARGV[k]) end
local cost, always, nl = tonumber(ARGV[2]), A[3] == 1, #KEYS
local vals = redis.call('MGET', unpack(KEYS))
local st, tats, news, taus, dirty = {}, {}, {}, {}, {}
local bind, bok, brem, breset, bretry, bsoft
local allok = true
for i = 1, nl do
  local t, tau, soft = A[3 * i + 1], A[3 * i + 2], A[3 * i + 3]
  local old = tonumber(vals[i]) or 0
  if old - now > 2 * tau then old, dirty[i] = now + tau, true end
  local tat = old
  if tat < now then tat = now end
  local newtat = tat + cost * t
  st[i], tats[i], news[i], taus[i] = old, tat, newtat, tau
  local ok, rem, reset, retry = true, 0, newtat - now, 0
  if newtat - now <= tau then
    rem = math.floor((tau - newtat + now) / t)
  else
    ok, reset, retry = false, tat - now, newtat - tau - now
    if cost * t > tau then retry = -1 end
  end
` + luaBind + `end
if allok or always then
  for i = 1, nl do
    local newtat, tau = news[i], taus[i]
    if newtat - now <= tau then
      if cost > 0 then st[i], dirty[i] = newtat, true end
    else
      local s = newtat
      if s > now + tau then s = now + tau end
      if s < tats[i] then s = tats[i] end
      st[i], dirty[i] = s, true
      if i == bind then breset = s - now end
    end
  end
end
for i = 1, nl do
  local key, exp = KEYS[i], st[i]
  if dirty[i] then
    if exp > now then
      redis.call('SET', key, exp, 'PX', math.ceil((exp - now) / 1000) + pad)
    elseif vals[i] then
      redis.call('DEL', key)
    end
  elseif vals[i] and redis.call('PTTL', key) == -1 then
    if exp > now then
      redis.call('PEXPIRE', key, math.ceil((exp - now) / 1000) + pad)
    else
      redis.call('DEL', key)
    end
  end
end
if not bok then brem = 0 end
return {bok and 1 or 0, bind - 1, brem, breset, bretry}
`

// luaFixedWindowN: fixed window, two or more limits (KEYS[i] is limit i's
// state in luaFixedWindow's encoding). ARGV[3] count denied, then per
// limit: window W, effective capacity, soft overage, M. luaFixedWindow with
// luaTail's multi-limit path written out: one MGET, pass 1 evaluates every
// limit and picks the binding one, pass 2 consumes in all of them when
// all allow (or when denied requests count). A count that grows within
// the window it was written in is added to in place (INCRBY keeps the TTL
// the window's first write set). Before all that, the common case (every
// limit's window in force, every sum within its capacity) is decided
// with one INCRBY per limit; anything else takes those adds back and goes
// the general way.
const luaFixedWindowN = luaNow + `
local A = {} for k = 3, #ARGV do A[k] = tonumber(ARGV[k]) end
local cost, always, nl = tonumber(ARGV[2]), A[3] == 1, #KEYS
if cost > 0 then
  -- the common case: add to every count in place (luaFixedWindow1); when
  -- every value before the add held a count of the window in force and
  -- every sum is within its capacity, that is the decision; otherwise
  -- the adds are taken back and the general path below decides. A cost
  -- of 1 adds M's text (MT): a number argument is turned into text on
  -- every call
  local xs, done, fast = {}, 0, true
  local MT = {} for i = 1, #KEYS do MT[i] = ARGV[4 * i + 3] end
  for i = 1, nl do
    local inc = cost * A[4 * i + 3]
    if cost == 1 then inc = MT[i] end
    local x = redis.pcall('INCRBY', KEYS[i], inc)
    if type(x) ~= 'number' then fast = false break end
    xs[i], done = x, i
  end
  local bind, brem, breset, bsoft
  if fast then
    for i = 1, nl do
      local w, capa, soft, m = A[4 * i], A[4 * i + 1], A[4 * i + 2], A[4 * i + 3]
      local x = xs[i]
      local ix = x % m
      local count = (x - ix) / m - cost
      local nidx = math.floor(now / w)
      local cur = nidx % m
      local reset
      if ix == cur then
        reset = (nidx + 1) * w - now
      elseif ix == (cur + 1) % m then
        reset = (nidx + 2) * w - now
      end
      if count <= 0 or not reset or count + cost > capa then fast = false break end
      local rem = capa - count - cost
      local take = bind == nil
      if not take then
        local ra, rb = rem - soft, brem - bsoft
        if ra < 0 then ra = 0 end
        if rb < 0 then rb = 0 end
        take = ra < rb or (ra == rb and reset > breset)
      end
      if take then bind, brem, breset, bsoft = i, rem, reset, soft end
    end
  end
  if fast then return {1, bind - 1, brem, breset, 0} end
  for i = 1, done do
    local m = A[4 * i + 3]
    if xs[i] == cost * m then
      redis.call('DEL', KEYS[i])
    else
      redis.call('INCRBY', KEYS[i], -cost * m)
    end
  end
end
local vals = redis.call('MGET', unpack(KEYS))
local s1, s2, old, oix, int, idxs, cnts, ws, capas, ms, dirty = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
local bind, bok, brem, breset, bretry, bsoft
local allok = true
for i = 1, nl do
  local w, capa, soft, m = A[4 * i], A[4 * i + 1], A[4 * i + 2], A[4 * i + 3]
  local v, ix, n = vals[i], 0, 0
  local x = v and tonumber(v)
  if x and x >= 0 then
    ix = x % m
    n = (x - ix) / m
    int[i] = true
  end
  local nidx = math.floor(now / w)
  local idx, count = nidx, n
  if n ~= 0 then
    local diff = (nidx - ix) % m
    if diff >= m / 2 then diff = diff - m end
    if diff > 0 then count = 0 else idx = nidx - diff end
  end
  if idx > nidx + 1 then
    -- a window more than one after now's (the clock went back): its count
    -- is carried into now's window (the next window stays in force: a
    -- caller that read the clock before a concurrent one rolled it over)
    idx = nidx; ix = idx % m; dirty[i] = true
  end
  s1[i], s2[i], old[i], idxs[i], cnts[i], ws[i], capas[i], ms[i] = ix, n, n, idx, count, w, capa, m
  oix[i] = vals[i] and (dirty[i] and -1 or ix) or -1
  local fin = (idx + 1) * w
  local ok, rem, reset, retry = true, capa - count - cost, fin - now, 0
  if count + cost > capa then
    ok, rem, retry = false, capa - count, fin - now
    if cost > capa then retry = -1 end
  end
` + luaBind + `end
if allok or always then
  for i = 1, nl do
    local count, capa = cnts[i], capas[i]
    if count + cost <= capa then
      if cost > 0 then s1[i], s2[i], dirty[i] = idxs[i] % ms[i], count + cost, true end
    else
      s1[i], s2[i], dirty[i] = idxs[i] % ms[i], math.min(count + cost, capa), true
    end
  end
end
for i = 1, nl do
  local key, exp = KEYS[i], -1
  local repair = not dirty[i] and vals[i] and redis.call('PTTL', key) == -1
  if dirty[i] or repair then
    exp = 0
    if s2[i] ~= 0 then
      local w = ws[i]
      local nidx = math.floor(now / w)
      local idx = nidx
      local m = ms[i]
      local diff = (nidx - s1[i]) % m
      if diff >= m / 2 then diff = diff - m end
      if diff <= 0 then idx = nidx - diff end
      exp = (idx + 1) * w
    end
  end
  if exp > now then
    local n, ix = s2[i], s1[i]
    if dirty[i] and int[i] and oix[i] == ix and cnts[i] == old[i] and n > old[i]
        and redis.call('PTTL', key) >= 0 then
      redis.call('INCRBY', key, (n - old[i]) * ms[i])
    elseif dirty[i] then
      redis.call('SET', key, n * ms[i] + ix, 'PX', math.ceil((exp - now) / 1000) + pad)
    else
      redis.call('PEXPIRE', key, math.ceil((exp - now) / 1000) + pad)
    end
  elseif exp ~= -1 and vals[i] then
    redis.call('DEL', key)
  end
end
if not bok then brem = 0 end
return {bok and 1 or 0, bind - 1, brem, breset, bretry}
`

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
