package redisstore

// The Lua scripts port core's algorithms (core/algo.go and the algo_*.go
// files beside it, (*core.Policy).Decide) line by line. Redis's Lua computes on doubles; every quantity is an
// integer below 2^53 (µs since the epoch, counts below 2^31), so integer
// math is exact, and the one floating-point formula (the sliding counter's
// estimate) is evaluated in the same order as in Go: sum + oldest*((L-e)/L).
// Go does the per-policy arithmetic once (emission interval, effective
// capacity, bucket length) and passes it in ARGV.
//
// Five generic scripts, one per algorithm (the sliding log's in
// lua_slidinglog.go), serve any policy; the common
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

// luaWindowIndex defines the fixed window's index at now, widx(i) (now /
// W), and the end of window idx, wend(i, idx) ((idx + 1) × W), or a
// calendar limit's from its periods in ARGV (see luaFixedWindow).
const luaWindowIndex = `
local function widx(i)
  local w = arg(i, 1)
  if w > 0 then return math.floor(now / w) end
  if now < arg(i, 8) or now >= arg(i, 12) then
    error('limitkit: calendar limit: the Redis clock is more than a period away from the caller clock')
  end
  local i1 = arg(i, 7)
  if now < arg(i, 9) then return i1 - 1 end
  if now < arg(i, 10) then return i1 end
  if now < arg(i, 11) then return i1 + 1 end
  return i1 + 2
end
local function wend(i, idx)
  local w = arg(i, 1)
  if w > 0 then return (idx + 1) * w end
  local d = idx - arg(i, 7)
  if d < 0 then return arg(i, 9) end
  if d == 0 then return arg(i, 10) end
  if d == 1 then return arg(i, 11) end
  return arg(i, 12)
end
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
// from the ceiling, which bounds the count), then a calendar limit's
// periods (core.PerCalendar; W is 0): I1, the index of the period that
// holds the caller's clock, and B0..B4, the start of period I1 − 1 and
// the ends of periods I1 − 1 .. I1 + 2 (µs; zeros for a duration
// window). Redis has no time zone database: Go works the boundaries out
// (calendar.go) and the script picks the period holding its now among
// them, so the server's clock decides the period as it decides every
// window; a server clock outside [B0, B4) (more than a period from the
// caller's) is an error, which the policy's fail mode answers.
const luaFixedWindow = `
local STRIDE, SOFT, SOFTE = 12, 3, 6
` + luaHead + luaWindowIndex + `
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
  local idx = widx(i)
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
  local idx = current(i, s, arg(i, 1))
  return wend(i, idx)
end

local function step(i, s, mode)
  local w, capa, m = arg(i, 1), arg(i, 2), arg(i, 4)
  if E then capa = arg(i, 5) end
  local idx, count = current(i, s, w)
  local nidx = widx(i)
  if idx > nidx + 1 then
    -- a window more than one after now's (the clock went back): its count
    -- is carried into now's window (the next window stays in force: a
    -- caller that read the clock before a concurrent one rolled it over)
    idx = nidx; s[1] = idx % m; dirty[i] = true
  end
  local fin = wend(i, idx)
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
