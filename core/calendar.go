package core

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Period is a calendar period for [PerCalendar]: a day, a week, a month
// or a year, counted between the local midnights of a time zone. The zero
// Period is not a calendar period (a Limit with a duration window).
type Period uint8

// The calendar periods. A period starts at local midnight: CalendarDay
// at every midnight (23 or 25 hours across a daylight-saving change),
// CalendarWeek at the midnight that starts the week's first day (Monday,
// as ISO 8601, unless [Limit.WithWeekStart] says otherwise), CalendarMonth
// on the 1st, CalendarYear on January 1.
const (
	CalendarDay Period = iota + 1
	CalendarWeek
	CalendarMonth
	CalendarYear
)

// periodNames are the periods' words, as "N per calendar <word>".
var periodNames = [...]string{CalendarDay: "day", CalendarWeek: "week", CalendarMonth: "month", CalendarYear: "year"}

// periodWindows are the periods' nominal lengths, the Window of a calendar
// limit: what metrics, the RateLimit-Policy header and the fleet tier's
// figures read. The boundaries come from the calendar, not from it.
var periodWindows = [...]time.Duration{CalendarDay: 24 * time.Hour, CalendarWeek: 7 * 24 * time.Hour, CalendarMonth: 31 * 24 * time.Hour, CalendarYear: 366 * 24 * time.Hour}

// PerCalendar returns a limit of n requests per calendar period p in the
// time zone loc: a fixed window whose boundaries are loc's local midnights
// (a calendar day across a daylight-saving change lasts 23 or 25 hours; a
// month is 28 to 31 days; February 29 belongs to its month; a week may
// span a year end). A nil loc means UTC. The week starts on Monday (ISO
// 8601); [Limit.WithWeekStart] changes it.
//
// Only the [FixedWindow] algorithm holds calendar semantics:
// [Policy.Validate] refuses a calendar limit under any other algorithm
// (they measure durations since each request, which no calendar
// boundary can reset), and under an elastic policy. Decision.ResetAfter
// and, on a denial, RetryAfter are the time to the next boundary, so the
// adapters' X-RateLimit-Reset and Retry-After point at it.
//
// The limit's Window is the period's nominal length (24 h, 7 days, 31
// days, 366 days), which metrics and the RateLimit-Policy header show;
// its period, zone and week start are unexported and survive copies of
// the value, but not JSON or YAML encoding of the Limit (a rules file
// writes them as "N per calendar month" and the rule's timezone field).
// An unknown p is an error at Policy.Validate.
func PerCalendar(n int64, p Period, loc *time.Location) Limit {
	if loc == nil {
		loc = time.UTC
	}
	l := Limit{Requests: n, cal: &calSpec{period: p, loc: loc}}
	if p >= CalendarDay && p <= CalendarYear {
		l.Window = periodWindows[p]
	}
	return l
}

// WithWeekStart returns a copy of a [CalendarWeek] limit whose weeks start
// on d (Monday by default, as ISO 8601). Policy.Validate refuses a d
// outside Sunday..Saturday, or a week start on a limit that is not a
// calendar week.
func (l Limit) WithWeekStart(d time.Weekday) Limit {
	ws := int8(-1)
	if d >= time.Sunday && d <= time.Saturday {
		ws = int8((int(d) + 6) % 7)
	}
	if l.cal == nil && ws == 0 {
		return l // Monday on a duration window: nothing to record
	}
	c := calSpec{}
	if l.cal != nil {
		c = *l.cal // copy: the receiver's copies share its spec
	}
	c.weekStart = ws
	l.cal = &c
	return l
}

// calSpec is a calendar limit's period, zone and week start (days after
// Monday; -1 invalid). A Limit holds it by pointer and never changes it
// once made: copies of the Limit share it.
type calSpec struct {
	period    Period
	loc       *time.Location
	weekStart int8
}

// spec is l's calendar spec, or the zero one for a duration window.
func (l Limit) spec() calSpec {
	if l.cal == nil {
		return calSpec{}
	}
	return *l.cal
}

// validateCalendar checks a calendar limit's period, zone, week start and
// algorithm.
func (l Limit) validateCalendar(alg Algorithm) error {
	c := l.spec()
	switch {
	case c.period < CalendarDay || c.period > CalendarYear:
		return fmt.Errorf("unknown calendar period %d (use core.CalendarDay, CalendarWeek, CalendarMonth or CalendarYear)", c.period)
	case c.weekStart < 0:
		return fmt.Errorf("%s: week start is not a weekday (use time.Sunday .. time.Saturday)", l)
	case c.weekStart != 0 && c.period != CalendarWeek:
		return fmt.Errorf("%s: a week start applies to calendar weeks only; remove it", l)
	case l.Window != periodWindows[c.period]:
		return fmt.Errorf("%s: window %v is not the period's (build calendar limits with core.PerCalendar)", l, l.Window)
	case alg != FixedWindow:
		return fmt.Errorf("%s: calendar periods need the fixed_window algorithm; %v measures durations since each request, which no calendar boundary resets", l, alg)
	}
	return nil
}

// validateCalendar refuses an elastic policy with a calendar limit: the
// ceiling's scripts and tiers count in duration windows.
func (p *Policy) validateCalendar() error {
	if p.Elastic == nil {
		return nil
	}
	for i, l := range p.Limits {
		if l.cal != nil {
			return fmt.Errorf("core: policy %q: limits[%d]: %s: calendar limits cannot be elastic; remove elastic or use a duration window", p.Name, i, l)
		}
	}
	return nil
}

// sameLimit reports whether a and b are the same limit, their zones
// compared by name (every time.LoadLocation returns a new pointer).
func sameLimit(a, b Limit) bool {
	if a.Requests != b.Requests || a.Window != b.Window || a.Burst != b.Burst || (a.cal == nil) != (b.cal == nil) {
		return false
	}
	if a.cal == nil || a.cal == b.cal {
		return true
	}
	x, y := *a.cal, *b.cal
	if x.loc != y.loc && x.loc != nil && y.loc != nil && x.loc.String() == y.loc.String() {
		y.loc = x.loc
	}
	return x == y
}

// calendarString is the String of a calendar limit: "5 per calendar
// month", "5 per calendar month in Europe/Berlin", "5 per calendar week
// in UTC from sunday" (rules.ParseLimit reads it back).
func (l Limit) calendarString() string {
	c := l.spec()
	name := "?"
	if c.period >= CalendarDay && c.period <= CalendarYear {
		name = periodNames[c.period]
	}
	s := fmt.Sprintf("%d per calendar %s", l.Requests, name)
	if c.loc != nil && c.loc != time.UTC && c.loc.String() != "UTC" {
		s += " in " + c.loc.String()
	}
	if c.weekStart > 0 {
		s += " from " + lowerWeekday(time.Weekday((int(c.weekStart)+1)%7))
	} else if c.weekStart < 0 {
		s += " from ?"
	}
	return s
}

func lowerWeekday(d time.Weekday) string {
	b := []byte(d.String())
	b[0] += 'a' - 'A'
	return string(b)
}

// calendar is a calendar limit's boundaries, shared by the plan's
// copies. It remembers the last period it worked out: a decision inside
// it costs one atomic load and two comparisons; the time zone arithmetic
// runs once per period (and when callers' instants straddle a boundary).
type calendar struct {
	period Period
	loc    *time.Location
	ws     int64 // the week's first day, in days after Monday
	last   atomic.Pointer[calSpan]
}

// calSpan is one period: its index and [start, end) in µs.
type calSpan struct{ idx, start, end int64 }

func newCalendar(l Limit) *calendar {
	c := l.spec()
	loc := c.loc
	if loc == nil {
		loc = time.UTC
	}
	return &calendar{period: c.period, loc: loc, ws: int64(c.weekStart)}
}

// index is the index of the period holding now (µs): days, weeks, months
// or years since the one holding 1970-01-01 in the zone.
func (c *calendar) index(now int64) int64 {
	if s := c.last.Load(); s != nil && now >= s.start && now < s.end {
		return s.idx
	}
	return c.at(now).idx
}

// endOf is the end of period idx (the start of idx + 1), in µs.
func (c *calendar) endOf(idx int64) int64 {
	if s := c.last.Load(); s != nil && s.idx == idx {
		return s.end
	}
	return c.startOf(idx + 1)
}

// at works out (and remembers) the period holding now.
func (c *calendar) at(now int64) *calSpan {
	y, m, d := time.UnixMicro(now).In(c.loc).Date()
	var idx int64
	switch c.period {
	case CalendarDay:
		idx = civilDay(y, m, d)
	case CalendarWeek:
		// 1970-01-01 was a Thursday: day −3 a Monday
		idx = floorDiv(civilDay(y, m, d)+3-c.ws, 7)
	case CalendarMonth:
		idx = int64(y-1970)*12 + int64(m) - 1
	default:
		idx = int64(y - 1970)
	}
	s := &calSpan{idx: idx, start: c.startOf(idx), end: c.startOf(idx + 1)}
	// a midnight a zone skipped (a change at 00:00) is resolved by
	// time.Date either way; keep now inside its period whatever it chose
	s.start = min(s.start, now)
	s.end = max(s.end, now+1)
	c.last.Store(s)
	return s
}

// startOf is the first instant (µs) of period idx: the local midnight
// that starts it.
func (c *calendar) startOf(idx int64) int64 {
	var y int
	m, d := time.January, 1
	switch c.period {
	case CalendarDay, CalendarWeek:
		days := idx
		if c.period == CalendarWeek {
			days = 7*idx - 3 + c.ws
		}
		y, m, d = time.Unix(days*86400, 0).UTC().Date()
	case CalendarMonth:
		q := floorDiv(idx, 12)
		y, m = 1970+int(q), time.Month(idx-12*q+1)
	default:
		y = 1970 + int(idx)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, c.loc).UnixMicro()
}

// civilDay is the number of days from 1970-01-01 to the date y-m-d.
func civilDay(y int, m time.Month, d int) int64 {
	return floorDiv(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix(), 86400)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// index is the fixed window's index at now: now / W, or the calendar
// period's.
func (k *plan) index(now int64) int64 {
	if k.cal == nil {
		return now / k.w
	}
	return k.cal.index(now)
}

// end is the end (µs) of the fixed window idx.
func (k *plan) end(idx int64) int64 {
	if k.cal == nil {
		return (idx + 1) * k.w
	}
	return k.cal.endOf(idx)
}

// For store implementers: CalendarPeriod reports the calendar period of
// the policy's limit i ([PerCalendar]) that holds now (µs since the
// epoch): its index (days, weeks, months or years since the period
// holding 1970-01-01 in the limit's zone; core's fixed window keeps it
// mod 2^33 beside the count) and its bounds [start, end) in µs. ok is
// false for a limit with a duration window (or i out of range). Stores
// without core's math (Redis's Lua has no time zone database) pass these
// bounds to their own arithmetic. Safe for concurrent use.
func (c *Compiled) CalendarPeriod(i int, now int64) (index, start, end int64, ok bool) {
	if i < 0 || i >= len(c.limits) || c.limits[i].cal == nil {
		return 0, 0, 0, false
	}
	s := c.limits[i].cal.at(min(max(now, 0), MaxNow))
	return s.idx, s.start, s.end, true
}
