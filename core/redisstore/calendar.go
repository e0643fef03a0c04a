package redisstore

import (
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
)

// Calendar limits (core.PerCalendar) are fixed windows whose boundaries
// are a time zone's local midnights. Redis's Lua has no time zone
// database, so Go works the periods out and passes them in each call:
// the index of the period holding the caller's clock (the now the
// Limiter passes to Take, whichever clock decides) and the boundaries of
// the period before it and the two after (luaFixedWindow's ARGV). The
// script then picks the period that holds its own now, the Redis
// server's TIME by default: the server's clock decides when a period
// ends, as it decides every window, and the two clocks may disagree by up
// to a period (at least 23 hours) before a call fails (a store error, for
// the policy's fail mode). A policy with a calendar limit is always
// decided by the generic fixed-window script. Keys expire at their
// period's end (PX to the boundary, plus the TTL pad).

// calArgs is a calendar policy's script tail for callers whose clock is
// in [lo, hi): the tail with every calendar limit's periods filled in.
type calArgs struct {
	lo, hi int64
	tail   []any
}

// calendarLimits returns the indexes of p's calendar limits and its
// compiled form (nil, nil for a policy without one).
func calendarLimits(p *core.Policy) ([]int, *core.Compiled) {
	cp, err := p.Compile()
	if err != nil {
		return nil, nil
	}
	var idx []int
	for i := range p.Limits {
		if _, _, _, ok := cp.CalendarPeriod(i, 0); ok {
			idx = append(idx, i)
		}
	}
	if idx == nil {
		return nil, nil
	}
	return idx, cp
}

// rowStart is the offset of limit i's row in a generic fixed-window tail
// (after count denied, TTL pad and mode), and calOff the offset of the
// calendar numbers in a row.
const (
	rowStart = 3
	rowLen   = 12
	calOff   = 6
)

// tailAt is the take's tail for a call at now: c.tail, or for a calendar
// policy that tail with the periods around now filled in (remembered
// until now leaves them: one allocation per period).
func (c *compiled) tailAt(now time.Time) []any {
	if c.cal == nil {
		return c.tail
	}
	us := now.UnixMicro()
	if a := c.calTail.Load(); a != nil && us >= a.lo && us < a.hi {
		return a.tail
	}
	a := c.calendarArgs(c.tail, us)
	c.calTail.Store(a)
	return a.tail
}

// calendarArgs copies tail (a generic fixed-window tail) with the periods
// of every calendar limit around now filled in.
func (c *compiled) calendarArgs(tail []any, now int64) *calArgs {
	out := &calArgs{lo: 0, hi: core.MaxNow + 1, tail: append([]any(nil), tail...)}
	for _, i := range c.cal {
		i1, b1, b2, _ := c.core.CalendarPeriod(i, now)
		_, b0, _, _ := c.core.CalendarPeriod(i, b1-1)
		_, _, b3, _ := c.core.CalendarPeriod(i, b2)
		_, _, b4, _ := c.core.CalendarPeriod(i, b3)
		if b1 <= 0 {
			b0 = 0 // instants before 1970 decide as its first
		}
		row := rowStart + i*rowLen
		out.tail[row] = int64(0) // W = 0: a calendar limit
		copy(out.tail[row+calOff:row+rowLen], []any{i1, b0, b1, b2, b3, b4})
		out.lo, out.hi = max(out.lo, b1), min(out.hi, b2)
	}
	return out
}

// calendarState is what a compiled calendar policy keeps.
type calendarState struct {
	cal     []int          // the calendar limits' indexes
	core    *core.Compiled // core's periods
	calTail atomic.Pointer[calArgs]
}
