package redisstore

// luaGCRA1E: GCRA, one limit, elastic (core.Policy.Elastic), written out
// as the hard luaGCRA1 is: one GET, at most one write. It reads and writes
// the tat as the other GCRA scripts do and replies in the generic scripts'
// shape, with the elastic flag (see the calling convention in scripts.go).
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
