package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// TestCalendarBoundaries (issue 36): the period holding an instant runs
// from the zone's local midnight to the next period's: a day across a
// DST change is 23 or 25 hours (23.5 and 24.5 on Lord Howe's 30-minute
// change), February 29 2028 belongs to its month, a year and a day end at
// the local new year, and an ISO week spans the year end.
func TestCalendarBoundaries(t *testing.T) {
	type tc struct {
		name       string
		zone       string
		period     core.Period
		sunday     bool   // weeks start on Sunday
		at         string // local "2006-01-02 15:04:05"
		start, end string // local
		length     time.Duration
	}
	cases := []tc{
		{"NY day, March DST", "America/New_York", core.CalendarDay, false, "2026-03-08 12:00:00", "2026-03-08 00:00:00", "2026-03-09 00:00:00", 23 * time.Hour},
		{"NY day, before the March jump", "America/New_York", core.CalendarDay, false, "2026-03-08 01:59:59", "2026-03-08 00:00:00", "2026-03-09 00:00:00", 23 * time.Hour},
		{"NY day, November DST", "America/New_York", core.CalendarDay, false, "2026-11-01 23:00:00", "2026-11-01 00:00:00", "2026-11-02 00:00:00", 25 * time.Hour},
		{"NY month, March", "America/New_York", core.CalendarMonth, false, "2026-03-31 23:59:59", "2026-03-01 00:00:00", "2026-04-01 00:00:00", 31*24*time.Hour - time.Hour},
		{"London day, March DST", "Europe/London", core.CalendarDay, false, "2026-03-29 00:30:00", "2026-03-29 00:00:00", "2026-03-30 00:00:00", 23 * time.Hour},
		{"London day, October DST", "Europe/London", core.CalendarDay, false, "2026-10-25 01:30:00", "2026-10-25 00:00:00", "2026-10-26 00:00:00", 25 * time.Hour},
		{"Lord Howe day, October DST", "Australia/Lord_Howe", core.CalendarDay, false, "2026-10-04 12:00:00", "2026-10-04 00:00:00", "2026-10-05 00:00:00", 23*time.Hour + 30*time.Minute},
		{"Lord Howe day, April DST", "Australia/Lord_Howe", core.CalendarDay, false, "2026-04-05 12:00:00", "2026-04-05 00:00:00", "2026-04-06 00:00:00", 24*time.Hour + 30*time.Minute},
		{"leap day", "UTC", core.CalendarDay, false, "2028-02-29 13:00:00", "2028-02-29 00:00:00", "2028-03-01 00:00:00", 24 * time.Hour},
		{"leap February", "UTC", core.CalendarMonth, false, "2028-02-29 23:59:59", "2028-02-01 00:00:00", "2028-03-01 00:00:00", 29 * 24 * time.Hour},
		{"Berlin year end, day", "Europe/Berlin", core.CalendarDay, false, "2026-12-31 23:59:59", "2026-12-31 00:00:00", "2027-01-01 00:00:00", 24 * time.Hour},
		{"Berlin year", "Europe/Berlin", core.CalendarYear, false, "2026-12-31 23:59:59", "2026-01-01 00:00:00", "2027-01-01 00:00:00", 365 * 24 * time.Hour},
		{"leap year", "Europe/Berlin", core.CalendarYear, false, "2028-01-01 00:00:00", "2028-01-01 00:00:00", "2029-01-01 00:00:00", 366 * 24 * time.Hour},
		{"ISO week over the year end", "Europe/Berlin", core.CalendarWeek, false, "2027-01-01 10:00:00", "2026-12-28 00:00:00", "2027-01-04 00:00:00", 7 * 24 * time.Hour},
		{"ISO week, its Sunday", "Europe/Berlin", core.CalendarWeek, false, "2027-01-03 23:59:59", "2026-12-28 00:00:00", "2027-01-04 00:00:00", 7 * 24 * time.Hour},
		{"Sunday week over the year end", "Europe/Berlin", core.CalendarWeek, true, "2027-01-02 10:00:00", "2026-12-27 00:00:00", "2027-01-03 00:00:00", 7 * 24 * time.Hour},
		{"Sunday week starts on Sunday", "Europe/Berlin", core.CalendarWeek, true, "2027-01-03 00:00:00", "2027-01-03 00:00:00", "2027-01-10 00:00:00", 7 * 24 * time.Hour},
		{"week across NY's March DST", "America/New_York", core.CalendarWeek, false, "2026-03-08 03:00:00", "2026-03-02 00:00:00", "2026-03-09 00:00:00", 7*24*time.Hour - time.Hour},
		{"the week of 1970-01-01", "America/New_York", core.CalendarWeek, false, "1970-01-01 20:00:00", "1969-12-29 00:00:00", "1970-01-05 00:00:00", 7 * 24 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loc := mustZone(t, c.zone)
			parse := func(s string) time.Time {
				v, err := time.ParseInLocation(time.DateTime, s, loc)
				require.NoError(t, err)
				return v
			}
			lim := core.PerCalendar(1, c.period, loc)
			if c.sunday {
				lim = lim.WithWeekStart(time.Sunday)
			}
			p := core.Policy{Name: "cal", Algorithm: core.FixedWindow, Limits: []core.Limit{lim}}
			cp, err := p.Compile()
			require.NoError(t, err)
			at := parse(c.at)
			_, start, end, ok := cp.CalendarPeriod(0, at.UnixMicro())
			require.True(t, ok)
			assert.Equal(t, parse(c.start).UnixMicro(), start, "start")
			assert.Equal(t, parse(c.end).UnixMicro(), end, "end")
			assert.Equal(t, c.length, time.Duration(end-start)*time.Microsecond)

			// the decision: admitted, ResetAfter to the end; the second
			// denied with RetryAfter to the end; at the end admitted again
			st := make([]int64, cp.StateWords())
			d := cp.Decide(st, at.UnixMicro(), 1)
			require.True(t, d.Allowed)
			assert.Equal(t, time.Duration(end-at.UnixMicro())*time.Microsecond, d.ResetAfter)
			d = cp.Decide(st, at.UnixMicro(), 1)
			require.False(t, d.Allowed)
			assert.Equal(t, time.Duration(end-at.UnixMicro())*time.Microsecond, d.RetryAfter)
			assert.Equal(t, end, cp.ExpiresAt(st, at.UnixMicro()))
			assert.False(t, cp.Decide(st, end-1, 1).Allowed, "a µs before the boundary")
			assert.True(t, cp.Decide(st, end, 1).Allowed, "at the boundary")
			if start <= 0 {
				return // instants before 1970 decide as 1970's first
			}
			// and the period before: its start is the boundary
			assert.True(t, cp.Decide(make([]int64, 1), start-1, 1).Allowed)
			_, _, prevEnd, _ := cp.CalendarPeriod(0, start-1)
			assert.Equal(t, start, prevEnd)
		})
	}
}

// TestCalendarWalkAcrossDST (issue 36): a Limiter on a manual clock,
// 3 per calendar day in New York, walked hour by hour from March 7 to
// March 10 2026 and over November 1: each local day admits exactly 3
// whatever its length, and a denial's RetryAfter lands on the next local
// midnight.
func TestCalendarWalkAcrossDST(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	for _, from := range []time.Time{
		time.Date(2026, 3, 7, 0, 0, 0, 0, ny),
		time.Date(2026, 10, 31, 0, 0, 0, 0, ny),
	} {
		s := mustMem()
		clock := core.NewManualClock(from)
		l := core.MustNewLimiter(s, core.Policy{Name: "d", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(3, core.CalendarDay, ny)}}, core.WithClock(clock))
		admitted := map[string]int{}
		for clock.Now().Before(from.AddDate(0, 0, 4)) {
			d, err := l.Allow(context.Background(), "k")
			require.NoError(t, err)
			now := clock.Now()
			y, m, dd := now.In(ny).Date()
			next := time.Date(y, m, dd+1, 0, 0, 0, 0, ny)
			if d.Allowed {
				admitted[now.In(ny).Format(time.DateOnly)]++
				assert.Equal(t, next.Sub(now), d.ResetAfter, now)
			} else {
				assert.Equal(t, next.Sub(now), d.RetryAfter, now)
			}
			clock.Advance(time.Hour)
		}
		for day, n := range admitted {
			assert.Equal(t, 3, n, day)
		}
		assert.Len(t, admitted, 4)
		s.Close()
	}
}

// TestCalendarValidation: calendar limits need the fixed window, a known
// period, a weekday, and no elastic ceiling; a nil zone is UTC.
func TestCalendarValidation(t *testing.T) {
	bad := []struct {
		p    core.Policy
		want string
	}{
		{core.Policy{Name: "a", Algorithm: core.GCRA, Limits: []core.Limit{core.PerCalendar(5, core.CalendarMonth, nil)}}, "calendar periods need the fixed_window algorithm"},
		{core.Policy{Name: "a", Algorithm: core.SlidingWindowCounter, Limits: []core.Limit{core.PerCalendar(5, core.CalendarDay, nil)}}, "calendar periods need the fixed_window algorithm"},
		{core.Policy{Name: "a", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.Period(9), nil)}}, "unknown calendar period 9"},
		{core.Policy{Name: "a", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.CalendarWeek, nil).WithWeekStart(time.Weekday(7))}}, "week start is not a weekday"},
		{core.Policy{Name: "a", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.CalendarMonth, nil).WithWeekStart(time.Sunday)}}, "calendar weeks only"},
		{core.Policy{Name: "a", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.CalendarMonth, nil).WithBurst(9)}}, "burst applies to token bucket and GCRA only"},
		{core.Policy{Name: "a", Algorithm: core.FixedWindow, Elastic: &core.Elastic{CeilingPercent: 150, Signal: calSignal{}}, Limits: []core.Limit{core.PerCalendar(5, core.CalendarMonth, nil)}}, "cannot be elastic"},
	}
	for _, b := range bad {
		err := b.p.Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), b.want)
	}
	p := core.Policy{Name: "ok", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.CalendarMonth, nil), core.PerMinute(2)}}
	require.NoError(t, p.Validate())
	assert.Equal(t, "5 per calendar month", p.Limits[0].String())
	assert.Equal(t, "5 per calendar week in Europe/Berlin from sunday", core.PerCalendar(5, core.CalendarWeek, mustZone(t, "Europe/Berlin")).WithWeekStart(time.Sunday).String())
	// nil is UTC
	cp, err := p.Compile()
	require.NoError(t, err)
	_, start, _, _ := cp.CalendarPeriod(0, time.Date(2026, 5, 17, 3, 0, 0, 0, time.UTC).UnixMicro())
	assert.Equal(t, time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), start)
	_, _, _, ok := cp.CalendarPeriod(1, 0)
	assert.False(t, ok, "a duration window has no calendar period")
	assert.True(t, strings.HasPrefix(core.PerCalendar(1, core.CalendarDay, nil).String(), "1 per calendar day"))

	// SameState compares zones by name: a zone loaded twice is one zone
	a, b := mustZone(t, "Europe/Berlin"), mustZone(t, "Europe/Berlin")
	p1 := core.Policy{Name: "x", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.CalendarMonth, a)}}
	p2 := core.Policy{Name: "x", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.CalendarMonth, b)}}
	assert.True(t, core.SameState(&p1, &p2))
	p2.Limits[0] = core.PerCalendar(5, core.CalendarMonth, mustZone(t, "Europe/London"))
	assert.False(t, core.SameState(&p1, &p2))
	p2.Limits[0] = core.PerCalendar(5, core.CalendarDay, a)
	assert.False(t, core.SameState(&p1, &p2))
}

// TestCalendarUsage (issue 36): Usage reports used, remaining and the
// time to the next boundary for a calendar limit, consuming nothing.
func TestCalendarUsage(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	s := mustMem()
	defer s.Close()
	clock := core.NewManualClock(time.Date(2026, 2, 27, 15, 0, 0, 0, berlin))
	l := core.MustNewLimiter(s, core.Policy{Name: "m", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(10, core.CalendarMonth, berlin)}}, core.WithClock(clock))
	ctx := context.Background()
	for range 3 {
		_, err := l.Allow(ctx, "c")
		require.NoError(t, err)
	}
	for range 2 { // twice: Usage consumes nothing
		u, err := l.Usage(ctx, "c")
		require.NoError(t, err)
		assert.Equal(t, int64(3), u.Used)
		assert.Equal(t, int64(7), u.Remaining)
		assert.Equal(t, time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), clock.Now().Add(u.ResetAfter))
	}
	clock.Advance(time.Date(2026, 3, 1, 0, 0, 0, 0, berlin).Sub(clock.Now()))
	u, err := l.Usage(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, int64(0), u.Used)
	assert.Equal(t, int64(10), u.Remaining)
}

type calSignal struct{}

func (calSignal) Acquire(context.Context, int64) (bool, error) { return true, nil }
