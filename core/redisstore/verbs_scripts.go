package redisstore

import (
	"strings"

	"github.com/limitkit/limitkit/core"
)

// The verb scripts (Peek, Charge, Refund, Reserve; Reset is a DEL) port
// core's verbs (core/verbs_model.go) the way the generic scripts port
// Decide: each is one generic algorithm body (its decode, encode, expires
// and step, read from the generic script) followed by the verb. They take
// the generic scripts' calling convention (see lua_generic.go: server TIME
// unless WithClientTime, keys under one hash tag, ARGV[5] "0"), with the
// cost clamped by Go to 2 × the largest capacity + 1 (every result
// saturates beyond it; integers stay exact in Lua's doubles); Reserve
// appends maxWait µs as the last ARGV. Work is bounded as the decision's:
// one MGET, O(limits) steps (each O(buckets) for the counter), one write
// per key; the sliding log's, O(log C) slot reads and at most C slots
// written per limit, as its decision of a cost of C.
//
// The math (per limit; C capacity, T emission interval):
//
//	Peek    the decision of the generic script, nothing written.
//	Charge  GCRA tat = max(tat, max(tat, now) + c×T capped at now + 2×C×T);
//	        token bucket tokens = max(tokens − c, min(tokens, −C)) after
//	        the refill; fixed window count = max(n, min(n + c, C)) in the
//	        window in force; counter: the current bucket likewise;
//	        sliding log: min(c, C) slots stamped max(now, newest) written
//	        over the oldest (its debt: denied at most one window after
//	        the charge).
//	Refund  GCRA tat = max(now, tat − c×T) when tat > now; token bucket
//	        tokens = min(tokens + c, C) (full: refill clock at now); fixed
//	        window count = max(0, n − c) in the window in force only;
//	        counter: up to c units from the window's N buckets, newest
//	        first; sliding log: the newest min(c, units inside the
//	        window) slots emptied, becoming the oldest.
//	Reserve (GCRA, token bucket) when every limit that denies would
//	        admit within min(maxWait, C×T): consume in every limit and
//	        reply the longest wait; else the generic decision.
//
// Charge, Refund and Reserve reply with core's ReportTo of the state
// afterwards: {allowed (a cost of 1 would be), binding limit, remaining
// against its effective capacity, resetAfter, retryAfter (-1 never), 0}
// (Reserve's reservation: {1, the limit that waits longest, 0,
// resetAfter, wait, 0, 1}).
//
// The sliding window log's Charge and Refund are its own decision
// script's reading of the rings (luaLogBody: a ring above 256 slots is
// probed by GETRANGE, never read whole) followed by the verb and its
// writes (verbs_log.go); Reserve is Take. Its Peek reads the rings in one
// read-only script call and decides in Go (verbs_log.go).

// luaVerbReport is core's ReportTo: each limit evaluated at a cost of 0
// (remaining, reset) and 1 (allowed, retry), the binding one chosen as
// core's binds does (luaBind).
const luaVerbReport = `
local function report()
  local bind, bok, brem, breset, bretry, bsoft
  local allok = true
  for i = 1, nl do
    cost = 0
    local _, rem, reset = step(i, st[i], EVAL)
    cost = 1
    local ok, _, _, retry = step(i, st[i], EVAL)
    local soft = arg(i, SOFT)
` + luaBind + `  end
  return bind, bok, brem, breset, bretry
end
`

// luaVerbRead reads and decodes every limit's state (the generic
// scripts' layout) and normalizes a clock step.
const luaVerbRead = `
local vals = redis.call('MGET', unpack(KEYS))
for i = 1, nl do
  existed[i] = vals[i] ~= false
  st[i] = decode(i, vals[i])
end
local c0 = cost
cost = 0
for i = 1, nl do step(i, st[i], EVAL) end -- normalize a clock step, as any decision
`

// luaVerbApply applies the verb VOP (defined per algorithm below) to every
// limit, then reports.
const luaVerbApply = `
if c0 > 0 then
  for i = 1, nl do VOP(i, st[i], c0); dirty[i] = true end
end
local bind, bok, brem, breset, bretry = report()
`

// luaVerbReply is the reply of Charge and Refund.
const luaVerbReply = `
local rem = 0
if bok and brem > 0 then rem = brem end
return {bok and 1 or 0, bind - 1, rem, breset, bretry, 0}
`

// per-algorithm verb operations, on a state decoded (and normalized) as
// the generic script's step reads it.
const (
	luaGCRAOps = `
local function charge(i, s, c)
  local t, tau = arg(i, 1), arg(i, 2)
  s[1] = math.max(s[1], math.min(math.max(s[1], now) + c * t, now + 2 * tau))
end
local function refund(i, s, c)
  if s[1] > now then s[1] = math.max(now, s[1] - c * arg(i, 1)) end
end
local function reserve(i, s, c)
  s[1] = math.max(s[1], now) + c * arg(i, 1)
end
local function horizon(i) return arg(i, 2) end
`
	luaTokenBucketOps = `
local function refill(i, s)
  local t, capa = arg(i, 1), arg(i, 2)
  local tokens, last = s[1], s[2]
  if last == 0 then return capa, now end
  if now > last then
    local n = idiv(now - last, t)
    if tokens + n >= capa then return capa, now end
    return tokens + n, last + n * t
  end
  return tokens, last
end
local function charge(i, s, c)
  local tokens, last = refill(i, s)
  s[1], s[2] = math.max(tokens - c, math.min(tokens, -arg(i, 2))), last
end
local function refund(i, s, c)
  if s[2] == 0 then return end
  local tokens, last = refill(i, s)
  tokens = tokens + c
  if tokens >= arg(i, 2) then tokens, last = arg(i, 2), now end
  s[1], s[2] = tokens, last
end
local function reserve(i, s, c)
  local tokens, last = refill(i, s)
  s[1], s[2] = tokens - c, last
end
local function horizon(i) return arg(i, 2) * arg(i, 1) end
`
	luaFixedWindowOps = `
local function charge(i, s, c)
  local w, capa, m = arg(i, 1), arg(i, 2), arg(i, 4)
  local idx, count = current(i, s, w)
  s[1], s[2] = idx % m, math.max(count, math.min(count + c, capa))
end
local function refund(i, s, c)
  local w, m = arg(i, 1), arg(i, 4)
  local idx, count = current(i, s, w)
  if count > 0 then s[1], s[2] = idx % m, math.max(0, count - c) end
end
`
	luaCounterOps = `
local function inforce(i, s)
  local idx = math.floor(now / arg(i, 2))
  if idx < s.cur then idx = s.cur end
  return idx
end
local function charge(i, s, c)
  local n, capa = arg(i, 1), arg(i, 3)
  local slots = n + 1
  local idx = inforce(i, s)
  if idx ~= s.cur then
    for j = math.max(s.cur + 1, idx - n), idx do s.cnt[j % slots + 1] = 0 end
    s.cur = idx
  end
  local k = idx % slots + 1
  s.cnt[k] = math.max(s.cnt[k], math.min(s.cnt[k] + c, capa))
end
local function refund(i, s, c)
  local n = arg(i, 1)
  local slots = n + 1
  local idx = inforce(i, s)
  local j = math.min(idx, s.cur)
  while j > idx - n and c > 0 do
    if j > s.cur - slots and j >= 0 then
      local k = j % slots + 1
      local take = math.min(s.cnt[k], c)
      s.cnt[k] = s.cnt[k] - take
      c = c - take
    end
    j = j - 1
  end
end
`
)

// luaReserve is core's ReserveTo: a reservation when it fits, else the
// generic script's decision (luaTail follows).
const luaReserve = `
local maxw = tonumber(ARGV[#ARGV])
cost = c0
local wbind, wait, can = nil, 0, true
for i = 1, nl do
  local ok, _, _, retry = step(i, st[i], EVAL)
  if not ok then
    if retry == -1 or retry > math.min(maxw, horizon(i)) then can = false end
    if wbind == nil or retry > wait then wbind, wait = i, retry end
  end
end
if can and wbind ~= nil then
  for i = 1, nl do reserve(i, st[i], c0); dirty[i] = true end
  local _, _, _, breset = report()
  PERSIST
  return {1, wbind - 1, 0, breset, wait, 0, 1}
end
cost = c0
`

// tailParts splits the generic scripts' luaTail into its decision and
// its persistence ("" when luaTail changed shape: the scripts built from
// them then fail, and the verb tests say so).
func tailParts() (decide, persist, reply string) {
	const p0, p1 = "\nfor i = 1, nl do\n  local exp = -1", "\n-- an elastic take may overdraw"
	i, j := strings.Index(luaTail, p0), strings.Index(luaTail, p1)
	if i < 0 || j < i {
		return "", "", ""
	}
	return luaTail[:i], luaTail[i:j], luaTail[j:]
}

// verbScripts are one algorithm's verb scripts; nil where not ported.
type verbScripts struct {
	peek, charge, refund, reserve *script
}

var verbs = func() [5]verbScripts {
	decide, persist, reply := tailParts()
	ops := [...]string{
		core.GCRA:                 luaGCRAOps,
		core.TokenBucket:          luaTokenBucketOps,
		core.FixedWindow:          luaFixedWindowOps,
		core.SlidingWindowCounter: luaCounterOps,
	}
	srcs := [...]string{
		core.GCRA:                 luaGCRA,
		core.TokenBucket:          luaTokenBucket,
		core.FixedWindow:          luaFixedWindow,
		core.SlidingWindowCounter: luaSlidingCounter,
	}
	var v [5]verbScripts
	for a, src := range srcs {
		if src == "" {
			continue
		}
		body, ok := strings.CutSuffix(src, luaTail)
		if !ok || decide == "" {
			body = "return redis.error_reply('limitkit: verb script not built')\n--"
		}
		v[a].peek = newScript(body + decide + reply)
		head := body + ops[a] + luaVerbReport + luaVerbRead
		v[a].charge = newScript(head + verbOp("charge", persist))
		v[a].refund = newScript(head + verbOp("refund", persist))
		if a == int(core.GCRA) || a == int(core.TokenBucket) {
			v[a].reserve = newScript(head + strings.Replace(luaReserve, "PERSIST", persist, 1) + decide + persist + reply)
		}
	}
	head, lpersist := logParts()
	if head == "" {
		head = "return redis.error_reply('limitkit: verb script not built')\n--"
	}
	head += luaLogOps + luaVerbReport
	v[core.SlidingWindowLog].charge = newScript(head + verbOp("charge", lpersist))
	v[core.SlidingWindowLog].refund = newScript(head + verbOp("refund", lpersist))
	return v
}()

// verbOp is the end of a Charge or Refund script: the verb's operation
// (name) on every limit, the report, persist (the algorithm's writes)
// and the reply.
func verbOp(name, persist string) string {
	return strings.ReplaceAll(luaVerbApply, "VOP", name) + persist + luaVerbReply
}

// Preload and Check load the verb scripts with the decision scripts, so
// that a verb's first call after them is one EVALSHA.
func init() {
	for _, v := range verbs {
		for _, sc := range []*script{v.peek, v.charge, v.refund, v.reserve} {
			if sc != nil {
				allScripts = append(allScripts, sc)
			}
		}
	}
	allScripts = append(allScripts, resetScript, logRead)
}

// resetScript forgets a key: every limit's state, one DEL of keys under
// one hash tag; it replies with an empty list.
var resetScript = newScript("redis.call('DEL', unpack(KEYS))\nreturn {}")
