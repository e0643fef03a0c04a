package redisstore

// The sliding log's generic script, under the calling convention of
// lua_generic.go: the largest of the five, with its own ring encoding.

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
