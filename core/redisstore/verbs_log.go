package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/limitkit/limitkit/core"
)

// logRead is the sliding window log's Peek: one read-only script call
// that returns the server's TIME and every limit's ring as stored (see
// luaSlidingLog); Go decodes the rings into core's state and decides with
// core.Compiled.PeekTo, so the peek is core's model itself. Bounded work:
// one GET per limit (a ring is at most 8 × (capacity + 1) bytes).
var logRead = newScript(`
local t = redis.call('TIME')
local r = {t[1], t[2]}
for i = 1, #KEYS do r[#r + 1] = redis.call('GET', KEYS[i]) or '' end
return r
`)

// peekLog is Peek for a sliding window log policy.
func (s *redisStore) peekLog(ctx context.Context, c *compiled, key string, now time.Time, cost int64) (core.Decision, error) {
	p := c.p
	cp, err := p.Compile()
	if err != nil {
		return core.Decision{}, err
	}
	keys := s.keys(c, key)
	v, err := logRead.rs.Run(ctx, s.client, keys).Slice()
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: policy %q: Peek: %w", p.Name, replyErr(err))
	}
	if len(v) != 2+len(keys) {
		return core.Decision{}, fmt.Errorf("redisstore: policy %q: Peek: unexpected reply of %d elements", p.Name, len(v))
	}
	us := now.UnixMicro()
	if !s.clientTime {
		sec, err1 := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
		usec, err2 := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
		if err1 != nil || err2 != nil {
			return core.Decision{}, fmt.Errorf("redisstore: policy %q: Peek: bad TIME %v %v", p.Name, v[0], v[1])
		}
		us = sec*1_000_000 + usec
	}
	st := make([]int64, cp.StateWords())
	off := 0
	for i := range keys {
		ring := ringWords(p, i)
		raw, _ := v[2+i].(string)
		decodeRing(st[off:off+ring], raw)
		off += ring
	}
	var d core.Decision
	cp.PeekTo(&d, st, make([]int64, len(st)), us, cost)
	return d, nil
}

// ringWords is limit i's state words under the sliding log: the head and
// one slot per unit of the ring's capacity (the elastic ceiling, else the
// effective capacity), as core lays them out.
func ringWords(p *core.Policy, i int) int {
	l := p.Limits[i]
	ce := effective(capacity(l), p.SoftPercent)
	if p.Elastic != nil {
		ce = capacity(l) * int64(p.Elastic.CeilingPercent) / 100
	}
	return 1 + int(ce)
}

// decodeRing reads a stored ring (an 8-byte little-endian head, then
// slots) into st (head, slots); a value of another layout is a fresh
// ring, as the script reads it.
func decodeRing(st []int64, raw string) {
	c := len(st) - 1
	n := len(raw)
	if n < 16 || n%8 != 0 || (n-8)/8 > c {
		return
	}
	h := le64(raw)
	if h < 0 || h >= int64(c) {
		return
	}
	st[0] = h
	for j := 0; j < (n-8)/8; j++ {
		st[1+j] = le64(raw[8+8*j:])
	}
}

// luaLogOps are the sliding log's Charge and Refund (core's ChargeTo and
// RefundTo on its ring), on luaLogBody's rings and helpers (at, fill,
// search), after its normalization of a clock step; with the shims that
// let luaVerbReport and luaVerbApply call its step and read its SOFT.
//
//	charge  min(c, C) slots stamped max(now, newest) + 1 over the oldest,
//	        head + m: units past C in the window overwrite the oldest,
//	        which then leave the window later (at most one window).
//	refund  m = min(c, units inside the window) (a binary search: the
//	        ring is sorted from the head); the newest m slots are
//	        emptied and become the oldest, head − m.
const luaLogOps = `
local st, dirty = {}, {}
local logstep = step
local function step(i, _, mode) return logstep(i, mode) end
local function arg(i, t) return t[i] end
local function charge(i, _, c)
  local s = L[i]
  local newest = at(s, s.c - 1) - 1
  if newest < 0 then newest = 0 end
  local stamp, m = math.max(now, newest), math.min(c, CAP[i])
  fill(s, 0, m, stamp + 1)
  s.h, s.newest = (s.h + m) % s.c, stamp + 1
end
local function refund(i, _, c)
  local s = L[i]
  local cut = now - W[i] + 1
  if cut < 0 then cut = 0 end
  local m = math.min(c, s.c - search(s, cut))
  if m > 0 then
    fill(s, s.c - m, m, 0)
    s.h, s.newest = (s.h - m) % s.c, nil
  end
end
local c0 = cost
`

// logParts splits luaSlidingLog into its reading of the rings (with the
// helpers, the normalization and step) and its persistence ("" when the
// script changed shape: the scripts built from them then fail, and the
// verb tests say so).
func logParts() (head, persist string) {
	const p0 = "\nif E then SOFT = SOFTE end\n"
	const p1, p2 = "\nfor i = 1, nl do\n  local s = L[i]\n  if s.dirty", "\n-- an elastic take may overdraw"
	i, j, k := strings.Index(luaSlidingLog, p0), strings.Index(luaSlidingLog, p1), strings.Index(luaSlidingLog, p2)
	if i < 0 || j < i || k < j {
		return "", ""
	}
	return luaSlidingLog[:i], luaSlidingLog[j:k]
}
