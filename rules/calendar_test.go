package rules_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/rules"
)

// TestParseCalendarLimit (issue 36): the calendar form of ParseLimit and
// the String of a calendar limit read back to the same limit.
func TestParseCalendarLimit(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	good := map[string]core.Limit{
		"10000 per calendar month":                         core.PerCalendar(10000, core.CalendarMonth, nil),
		"5 per calendar day":                               core.PerCalendar(5, core.CalendarDay, nil),
		"5 per Calendar Year":                              core.PerCalendar(5, core.CalendarYear, nil),
		"7 per calendar week":                              core.PerCalendar(7, core.CalendarWeek, nil),
		"5 per calendar day in Europe/Berlin":              core.PerCalendar(5, core.CalendarDay, berlin),
		"5 per calendar week in Europe/Berlin from sunday": core.PerCalendar(5, core.CalendarWeek, berlin).WithWeekStart(time.Sunday),
		"5 / calendar month":                               core.PerCalendar(5, core.CalendarMonth, nil),
	}
	for s, want := range good {
		got, err := rules.ParseLimit(s)
		require.NoError(t, err, s)
		assert.Equal(t, want.String(), got.String(), s)
		back, err := rules.ParseLimit(got.String())
		require.NoError(t, err)
		assert.Equal(t, got.String(), back.String())
		p := core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{got}}
		require.NoError(t, p.Validate(), s)
	}
	bad := map[string]string{
		"5 per calendar":                         "per calendar day|week|month|year",
		"5 per calendar fortnight":               `unknown calendar period "fortnight"`,
		"5 per calendar day in Mars/Olympus":     `unknown time zone "Mars/Olympus"`,
		"5 per calendar day in Local":            `time zone "Local"`,
		"5 per calendar month from sunday":       "calendar weeks only",
		"5 per calendar week from someday":       `"someday" is not a weekday`,
		"5 per calendar day burst 9":             `unexpected "burst 9"`,
		"0 per calendar day":                     "requests",
		"5 per calendar day in ../../etc/passwd": "unknown time zone",
	}
	for s, want := range bad {
		_, err := rules.ParseLimit(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), want, s)
	}
}

// TestCalendarRuleFields (issue 36): a rule's timezone and week_start
// give its calendar limits their zone and week start, the algorithm
// defaults to fixed_window, the set encodes and parses back, and every
// mistake is an error naming the rule and the field.
func TestCalendarRuleFields(t *testing.T) {
	set, err := rules.Parse([]byte(`
rules:
  - name: quota
    route: /api/*
    limits: ["5 per calendar month", "2 per calendar week", "1 per calendar day in UTC"]
    timezone: Europe/Berlin
    week_start: sunday
`))
	require.NoError(t, err)
	r, _ := set.Rule("quota")
	assert.Equal(t, core.FixedWindow, r.Algorithm)
	got := []string{r.Limits[0].String(), r.Limits[1].String(), r.Limits[2].String()}
	assert.Equal(t, []string{"5 per calendar month in Europe/Berlin", "2 per calendar week in Europe/Berlin from sunday", "1 per calendar day"}, got)
	for _, enc := range []func(*rules.Set) ([]byte, error){rules.EncodeYAML, rules.EncodeJSON} {
		b, err := enc(set)
		require.NoError(t, err)
		back, err := rules.Parse(b) // JSON or YAML, as Parse sniffs it
		require.NoError(t, err, string(b))
		br, _ := back.Rule("quota")
		assert.Equal(t, got, []string{br.Limits[0].String(), br.Limits[1].String(), br.Limits[2].String()})
		assert.Equal(t, core.FixedWindow, br.Algorithm)
	}

	bad := []struct{ doc, want string }{
		{`{name: q, route: /a, limits: ["5 per calendar month"], timezone: Europe/Nowhere}`, `rules[0] "q": timezone: unknown time zone "Europe/Nowhere"`},
		{`{name: q, route: /a, limits: ["5 per calendar week"], week_start: funday}`, `rules[0] "q": week_start: "funday" is not a weekday`},
		{`{name: q, route: /a, limits: ["5 per 1m"], timezone: Europe/Berlin}`, `rules[0] "q": timezone: applies to calendar limits`},
		{`{name: q, route: /a, limits: ["5 per calendar month"], week_start: sunday}`, `rules[0] "q": week_start: applies to "<n> per calendar week" limits`},
		{`{name: q, route: /a, limits: ["5 per calendar month"], algorithm: gcra}`, `calendar periods need the fixed_window algorithm`},
		{`{name: q, route: /a, limits: ["5 per calendar month"], timezon: UTC}`, `unknown field "timezon" (did you mean "timezone"?)`},
		{`{name: q, route: /a, limits: ["5 per calendar moon"]}`, `rules[0] "q": limits[0]: limit "5 per calendar moon": unknown calendar period "moon"`},
	}
	for _, b := range bad {
		_, err := rules.Parse([]byte("rules:\n  - " + b.doc + "\n"))
		require.Error(t, err, b.doc)
		assert.Contains(t, err.Error(), b.want, b.doc)
	}
}
