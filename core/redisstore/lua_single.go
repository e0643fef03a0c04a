package redisstore

// The single-limit scripts in this file are the common case written out as
// straight-line Lua: no helper closures, no per-call tables, one GET, at
// most one write (SET ... PX, or PEXPIRE/DEL to repair a key without a
// TTL), and the TTL padding compiled in. They read and write exactly the
// encodings of the generic scripts (lua_generic.go) and reply in the same
// shape, except an allowed decision, whose reply is
// struct.pack('<i8i8', remaining, resetAfter) (a string costs Redis less
// than a table; Go unpacks it, see unpackAllowed); they take their own
// ARGV:
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
  return struct.pack('<i8i8', math.floor((tau - newtat + now) / t), newtat - now)
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
if ok == 1 then return struct.pack('<i8i8', rem, reset) end
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
          return struct.pack('<i8i8', capa - count - cost, reset)
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
if ok == 1 then return struct.pack('<i8i8', rem, reset) end
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
if ok == 1 then return struct.pack('<i8i8', rem, reset) end
return {ok, 0, rem, reset, retry}
`
