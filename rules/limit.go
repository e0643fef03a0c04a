package rules

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/limitkit/limitkit/core"
)

// maxLimitText bounds the length of a limit string; anything longer is a
// mistake, and the bound keeps the parser cheap on hostile input.
const maxLimitText = 128

// ParseLimit parses the short form of a limit:
//
//	<requests> per <window> [burst <n>]
//	<requests> / <window> [burst <n>]
//
// where <window> is a Go duration with d (24h) as an extra unit ("15m",
// "1h30m", "500ms", "7d", "1d12h"), or an optional count followed by a unit
// word: "second", "minute", "hour", "day" (singular or plural, or the
// abbreviations s/sec, m/min, h/hr, d). Examples: "900 per 15m",
// "200 per 1m", "10 per minute", "5 per day", "100/s", "10 per 1s burst 20",
// "250 per 15 minutes". Calendar periods ([core.PerCalendar]) are
// written "<requests> per calendar day|week|month|year [in <IANA zone>]
// [from <weekday>]": "10000 per calendar month", "5 per calendar day in
// Europe/Berlin", "100 per calendar week from sunday" (UTC and Monday by
// default; a rule's timezone and week_start fields give its limits
// theirs). ulule/limiter's form "<requests>-<S|M|H|D>" is
// accepted too: "1000-H" is "1000 per hour", "5-s" "5 per second".
//
// The window is computed exactly: it must be a whole number of
// microseconds and at most 366 days; a longer window is an
// error, whatever the count and unit, never a wrapped-around value.
// ParseLimit checks the syntax and that every number is positive; whether
// the limit suits an algorithm (burst, resolution, bounds) is checked by
// [core.Policy.Validate]. It never panics. The output of [core.Limit.String]
// parses back to the same limit.
func ParseLimit(s string) (core.Limit, error) { return parseLimit(s, nil) }

// parseLimit is ParseLimit; def, when not nil, gives calendar limits
// written without a zone or week start the rule's.
func parseLimit(s string, def *calendarDefaults) (core.Limit, error) {
	if len(s) > maxLimitText {
		return core.Limit{}, fmt.Errorf("limit is longer than %d bytes", maxLimitText)
	}
	if l, ok, err := parseULule(s); ok {
		return l, err
	}
	f := strings.Fields(strings.ReplaceAll(s, "/", " / "))
	if len(f) == 0 {
		return core.Limit{}, errors.New(`empty limit; write e.g. "200 per 1m"`)
	}
	n, err := positiveInt(f[0], "requests")
	if err != nil {
		if strings.Index(f[0], "-") > 0 {
			err = fmt.Errorf(`%w (ulule/limiter's form is "<requests>-<S|M|H|D>", e.g. "1000-H", the same as "1000 per hour")`, err)
		}
		return core.Limit{}, err
	}
	if len(f) < 3 || (!strings.EqualFold(f[1], "per") && f[1] != "/") {
		return core.Limit{}, fmt.Errorf(`limit %q: want "<requests> per <window>", e.g. "200 per 1m"`, s)
	}
	if strings.EqualFold(f[2], "calendar") {
		return parseCalendar(s, n, f, def)
	}
	rest := f[2:]
	if strings.EqualFold(rest[len(rest)-1], "burst") {
		return core.Limit{}, fmt.Errorf(`limit %q: burst needs a number, e.g. "10 per 1s burst 20"`, s)
	}
	var burst int64
	if len(rest) >= 2 && strings.EqualFold(rest[len(rest)-2], "burst") {
		burst, err = positiveInt(rest[len(rest)-1], "burst")
		if err != nil {
			return core.Limit{}, fmt.Errorf("limit %q: %w", s, err)
		}
		rest = rest[:len(rest)-2]
	}
	var window time.Duration
	switch len(rest) {
	case 1:
		window, err = parseWindow(rest[0])
	case 2:
		var k int64
		k, err = positiveInt(rest[0], "window count")
		if err == nil {
			window, err = unitWindow(rest[1], k)
		}
	default:
		err = errors.New(`window: want a duration ("15m"), a unit ("minute") or both ("15 minutes")`)
	}
	if err != nil {
		return core.Limit{}, fmt.Errorf("limit %q: %w", s, err)
	}
	return core.Limit{Requests: n, Window: window, Burst: burst}, nil
}

// parseULule parses ulule/limiter's formatted rate, "<requests>-<period>"
// with period S, M, H or D (any case): "1000-H" is 1,000 per hour. ok
// reports whether s has that shape (a dash between a number and one
// letter).
func parseULule(s string) (l core.Limit, ok bool, err error) {
	num, unit, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found || len(unit) != 1 || num == "" || strings.IndexFunc(num, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return core.Limit{}, false, nil
	}
	n, err := positiveInt(num, "requests")
	if err != nil {
		return core.Limit{}, true, fmt.Errorf("limit %q: %w", s, err)
	}
	var w time.Duration
	switch unit {
	case "S", "s":
		w = time.Second
	case "M", "m":
		w = time.Minute
	case "H", "h":
		w = time.Hour
	case "D", "d":
		w = 24 * time.Hour
	default:
		return core.Limit{}, true, fmt.Errorf(`limit %q: unknown period %q in ulule/limiter's form "<requests>-<S|M|H|D>" (e.g. "1000-H", 1000 per hour)`, s, unit)
	}
	return core.Limit{Requests: n, Window: w}, true, nil
}

func positiveInt(s, what string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive whole number", what, s)
	}
	return n, nil
}

// units maps unit words to their duration.
var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// maxWindow is the longest window a rules file may write: the bound
// [core.Policy.Validate] puts on every limit's window. The parser rejects a
// longer window itself, so that no count or unit can overflow into a
// different, shorter window.
const maxWindow = 366 * 24 * time.Hour

// errTooLong is the error for a window above maxWindow.
func errTooLong(s string) error {
	return fmt.Errorf("window: %q is longer than 366 days, the longest window limitkit supports", s)
}

func unitWindow(unit string, count int64) (time.Duration, error) {
	u, ok := units[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("window: unknown unit %q (use second, minute, hour or day)", unit)
	}
	if count <= 0 || count > int64(maxWindow/u) {
		return 0, errTooLong(strconv.FormatInt(count, 10) + " " + unit)
	}
	return time.Duration(count) * u, nil
}

// durationUnits are the unit suffixes of a duration: Go's, plus d (24h).
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "μs": time.Microsecond,
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour,
}

// parseWindow parses a duration ("15m", "1h30m", "1.5s", "7d", "1d12h")
// or a bare unit word ("minute"). The result is exact: the value written,
// computed without rounding or overflow, must be a positive whole number
// of microseconds (the resolution limitkit counts time in) no longer than
// 366 days; anything else is an error, never a different window.
func parseWindow(s string) (time.Duration, error) {
	if _, ok := units[strings.ToLower(s)]; ok && s != "" && !isDigit(s[0]) {
		return unitWindow(s, 1)
	}
	bad := fmt.Errorf("window: %q is not a positive duration (e.g. 1s, 15m, 1h, 1d)", s)
	if s == "" || len(s) > maxLimitText {
		return 0, bad
	}
	// Sum the components in exact rational arithmetic: s is at most 128
	// bytes, so the numbers stay small, and nothing can wrap around.
	total, limit := new(big.Rat), new(big.Rat).SetInt64(int64(maxWindow))
	for rest := s; rest != ""; {
		i := 0
		for i < len(rest) && (isDigit(rest[i]) || rest[i] == '.') {
			i++
		}
		num := rest[:i]
		j := i
		for j < len(rest) && !isDigit(rest[j]) && rest[j] != '.' {
			j++
		}
		u, ok := durationUnits[rest[i:j]]
		if num == "" || num == "." || strings.Count(num, ".") > 1 || !ok {
			return 0, bad
		}
		v, ok := new(big.Rat).SetString(num)
		if !ok {
			return 0, bad
		}
		total.Add(total, v.Mul(v, new(big.Rat).SetInt64(int64(u))))
		if total.Cmp(limit) > 0 {
			return 0, errTooLong(s)
		}
		rest = rest[j:]
	}
	if total.Sign() <= 0 {
		return 0, bad
	}
	if !total.IsInt() || new(big.Int).Rem(total.Num(), big.NewInt(int64(time.Microsecond))).Sign() != 0 {
		return 0, fmt.Errorf("window: %q is not a whole number of microseconds, the resolution limitkit counts time in", s)
	}
	return time.Duration(total.Num().Int64()), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
