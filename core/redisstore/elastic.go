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

// gcra1E is the single-limit elastic GCRA script.
var gcra1E = newScript(padded(luaGCRA1E))

func init() { allScripts = append(allScripts, gcra1E) }
