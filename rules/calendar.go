package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/limitkit/limitkit/core"
)

// calendarDefaults are a rule's timezone and week_start fields, which
// its calendar limits written without "in <zone>" or "from <day>" take
// (the collector carries them while the rule's limits are parsed).
type calendarDefaults struct {
	loc       *time.Location
	weekStart time.Weekday
	hasWeek   bool
	// what the rule's limits used, for the fields' own errors
	sawCalendar, sawWeek bool
}

// calendarPeriods are the words of "N per calendar <period>".
var calendarPeriods = map[string]core.Period{
	"day": core.CalendarDay, "week": core.CalendarWeek, "month": core.CalendarMonth, "year": core.CalendarYear,
}

// weekdays are the week_start values and the words of "from <day>".
var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// parseCalendar parses the calendar form "<n> per calendar
// day|week|month|year [in <IANA zone>] [from <weekday>]" (f[2] is
// "calendar"); def, if not nil, gives the zone and week start of a limit
// that names none.
func parseCalendar(s string, n int64, f []string, def *calendarDefaults) (core.Limit, error) {
	rest := f[3:]
	if len(f) < 4 {
		return core.Limit{}, fmt.Errorf(`limit %q: want "<requests> per calendar day|week|month|year", e.g. "10000 per calendar month"`, s)
	}
	period, ok := calendarPeriods[strings.ToLower(f[3])]
	if !ok {
		return core.Limit{}, fmt.Errorf("limit %q: unknown calendar period %q (use day, week, month or year)", s, f[3])
	}
	rest = rest[1:]
	var loc *time.Location
	if len(rest) >= 2 && strings.EqualFold(rest[0], "in") {
		// the zone's '/' was split off as a token: join up to "from"
		j := 1
		for j < len(rest) && !strings.EqualFold(rest[j], "from") {
			j++
		}
		l, err := loadZone(strings.Join(rest[1:j], ""))
		if err != nil {
			return core.Limit{}, fmt.Errorf("limit %q: %w", s, err)
		}
		loc, rest = l, rest[j:]
	}
	ws, hasWS := time.Monday, false
	if len(rest) >= 2 && strings.EqualFold(rest[0], "from") {
		d, ok := weekdays[strings.ToLower(rest[1])]
		if !ok {
			return core.Limit{}, fmt.Errorf("limit %q: %q is not a weekday (use monday .. sunday)", s, rest[1])
		}
		if period != core.CalendarWeek {
			return core.Limit{}, fmt.Errorf("limit %q: a week start applies to calendar weeks only", s)
		}
		ws, hasWS, rest = d, true, rest[2:]
	}
	if len(rest) > 0 {
		return core.Limit{}, fmt.Errorf(`limit %q: unexpected %q; write "<requests> per calendar <period> [in <zone>] [from <weekday>]"`, s, strings.Join(rest, " "))
	}
	if def != nil {
		def.sawCalendar = true
		def.sawWeek = def.sawWeek || period == core.CalendarWeek
		if loc == nil {
			loc = def.loc
		}
		if !hasWS && def.hasWeek && period == core.CalendarWeek {
			ws, hasWS = def.weekStart, true
		}
	}
	l := core.PerCalendar(n, period, loc)
	if hasWS {
		l = l.WithWeekStart(ws)
	}
	return l, nil
}

// loadZone loads an IANA time zone by name ("Europe/Berlin", "UTC").
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("time zone %q: write an IANA name such as Europe/Berlin or UTC", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (write an IANA name such as Europe/Berlin or UTC)", name)
	}
	return loc, nil
}

// ruleCalendar resolves a rule's timezone and week_start fields (nil when
// it has neither).
func ruleCalendar(d *ruleDoc, fail func(field, msg string)) *calendarDefaults {
	if d.Timezone == "" && d.WeekStart == "" {
		return nil
	}
	def := &calendarDefaults{}
	if d.Timezone != "" {
		loc, err := loadZone(d.Timezone)
		if err != nil {
			fail("timezone", err.Error())
		}
		def.loc = loc
	}
	if d.WeekStart != "" {
		ws, ok := weekdays[strings.ToLower(d.WeekStart)]
		if !ok {
			fail("week_start", fmt.Sprintf("%q is not a weekday (use monday .. sunday; monday is the default)", d.WeekStart))
		}
		def.weekStart, def.hasWeek = ws, ok
	}
	return def
}

// checkRuleCalendar reports a timezone or week_start that no limit of the
// rule used.
func checkRuleCalendar(d *ruleDoc, def *calendarDefaults, fail func(field, msg string)) {
	if def == nil {
		return
	}
	if d.Timezone != "" && !def.sawCalendar {
		fail("timezone", `applies to calendar limits ("<n> per calendar day|week|month|year") and the rule has none`)
	}
	if d.WeekStart != "" && !def.sawWeek {
		fail("week_start", `applies to "<n> per calendar week" limits and the rule has none`)
	}
}

// isCalendar reports whether l counts calendar periods.
func isCalendar(l core.Limit) bool { return strings.Contains(l.String(), " per calendar ") }
