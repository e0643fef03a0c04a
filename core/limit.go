package core

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limit is one quota: at most Requests units of cost per Window.
//
// For the token bucket and GCRA, Burst is the bucket capacity (how much
// cost can be spent at once after a quiet period) and Requests/Window is
// the refill rate; a zero Burst means Burst = Requests. The window
// algorithms ignore Burst (it must be zero or equal to Requests).
//
// The algorithms work in whole microseconds, so Window must be at least
// one microsecond per request (a rate of at most 1,000,000 per second per
// key) and Requests must fit in 31 bits. [Policy.Validate] checks this.
//
// The zero Limit is invalid. Limit is a plain value, safe to copy and to
// share between goroutines.
type Limit struct {
	// Requests is the number of cost units allowed per Window. Must be > 0.
	Requests int64 `json:"requests" yaml:"requests"`
	// Window is the length of the period Requests refers to. Must be >= 1µs
	// per request.
	Window time.Duration `json:"window" yaml:"window"`
	// Burst is the bucket capacity for TokenBucket and GCRA; 0 means
	// Requests. Window algorithms require 0.
	Burst int64 `json:"burst,omitempty" yaml:"burst,omitempty"`

	// a calendar limit's period, zone and week start (see PerCalendar);
	// nil for a duration window. One pointer, not the three fields: a
	// Limit is copied into every Decision, and its size is on the hot path.
	cal *calSpec
}

// Per returns a limit of n requests per d.
func Per(n int64, d time.Duration) Limit { return Limit{Requests: n, Window: d} }

// PerSecond returns a limit of n requests per second.
func PerSecond(n int64) Limit { return Per(n, time.Second) }

// PerMinute returns a limit of n requests per minute.
func PerMinute(n int64) Limit { return Per(n, time.Minute) }

// PerHour returns a limit of n requests per hour.
func PerHour(n int64) Limit { return Per(n, time.Hour) }

// PerDay returns a limit of n requests per 24 hours.
func PerDay(n int64) Limit { return Per(n, 24*time.Hour) }

// WithBurst returns a copy of l with the given burst (bucket capacity).
func (l Limit) WithBurst(b int64) Limit { l.Burst = b; return l }

// capacity is the bucket size: Burst, or Requests when Burst is zero.
func (l Limit) capacity() int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Requests
}

// String formats the limit as "200 per 1m", "10 per 1s burst 20", or a
// calendar limit's as "5 per calendar month in Europe/Berlin" (the zone
// left out for UTC; " from sunday" for a week that does not start on
// Monday).
func (l Limit) String() string {
	if l.cal != nil {
		return l.calendarString()
	}
	s := strconv.FormatInt(l.Requests, 10) + " per " + formatWindow(l.Window)
	if l.Burst > 0 && l.Burst != l.Requests {
		s += " burst " + strconv.FormatInt(l.Burst, 10)
	}
	return s
}

// formatWindow formats a duration without trailing zero units: 15m, 1h30m,
// 24h, 500ms.
func formatWindow(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// maxSpan bounds the time a GCRA or token bucket takes to refill from empty
// (about 30 years in µs), so that now + span stays below 2^53.
const maxSpan = 30 * 366 * 24 * 3600 * 1_000_000

// maxRequests bounds Requests and Burst so counts fit the packed state and
// stay exact in Redis's Lua (doubles).
const maxRequests = 1<<31 - 1

func (l Limit) validate(alg Algorithm) error {
	if l.cal != nil {
		if err := l.validateCalendar(alg); err != nil {
			return err
		}
	}
	switch {
	case l.Requests <= 0:
		return fmt.Errorf("requests must be > 0, got %d", l.Requests)
	case l.Requests > maxRequests:
		return fmt.Errorf("requests must be <= %d, got %d", maxRequests, l.Requests)
	case l.Window < time.Microsecond:
		return fmt.Errorf("window must be >= 1µs, got %v", l.Window)
	case l.Window > 366*24*time.Hour:
		return fmt.Errorf("window must be <= 366 days, got %v", l.Window)
	case l.Burst < 0 || l.Burst > maxRequests:
		return fmt.Errorf("burst must be in [0, %d], got %d", maxRequests, l.Burst)
	}
	if alg == TokenBucket || alg == GCRA {
		if l.Window.Microseconds() < l.Requests {
			return fmt.Errorf("rate %s is above the 1 per µs resolution; use a longer window", l)
		}
		// a full bucket spans capacity × T; keep it (and now + it) exact in
		// the doubles of Redis's Lua
		if span := l.capacity() * EmissionInterval(l); span > maxSpan || span/EmissionInterval(l) != l.capacity() {
			return fmt.Errorf("%s: burst × refill interval exceeds 30 years; lower the burst or shorten the window", l)
		}
	} else if l.Burst != 0 && l.Burst != l.Requests {
		return fmt.Errorf("burst applies to token bucket and GCRA only; %v ignores it, remove it", alg)
	}
	if alg == SlidingWindowLog && l.Requests > maxLogRequests {
		return fmt.Errorf("sliding log keeps one timestamp per request; requests must be <= %d, got %d (use the sliding counter)", maxLogRequests, l.Requests)
	}
	return nil
}
