package redisstore

// The multi-limit scripts of the common shapes (several GCRA or several
// fixed-window limits), written out like the single-limit ones
// (lua_single.go: luaNow, luaBind), replying in the generic scripts'
// shape, except an allowed decision: struct.pack('<i8i8i8', remaining,
// resetAfter, binding index), see unpackAllowed.

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
if bok then return struct.pack('<i8i8i8', brem, breset, bind - 1) end
return {0, bind - 1, 0, breset, bretry}
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
  if fast then return struct.pack('<i8i8i8', brem, breset, bind - 1) end
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
if bok then return struct.pack('<i8i8i8', brem, breset, bind - 1) end
return {0, bind - 1, 0, breset, bretry}
`
