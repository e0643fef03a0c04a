package rules

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in   string
		want core.Limit
	}{
		{"900 per 15m", core.Per(900, 15*time.Minute)},
		{"200 per 1m", core.PerMinute(200)},
		{"  200   PER   1m ", core.PerMinute(200)},
		{"10 per minute", core.PerMinute(10)},
		{"5 per day", core.PerDay(5)},
		{"5 per 1d", core.PerDay(5)},
		{"5 per 7d", core.Per(5, 7*24*time.Hour)},
		{"250 per 15 minutes", core.Per(250, 15*time.Minute)},
		{"100/s", core.PerSecond(100)},
		{"100 / 1h30m", core.Per(100, 90*time.Minute)},
		{"10 per 1s burst 20", core.PerSecond(10).WithBurst(20)},
		{"10 per second BURST 20", core.PerSecond(10).WithBurst(20)},
		{"3 per 500ms", core.Per(3, 500*time.Millisecond)},
		{"1 per 2 hours", core.Per(1, 2*time.Hour)},
		{"7 per hr", core.PerHour(7)},
		{"1 per 1d12h", core.Per(1, 36*time.Hour)},
		{"1 per 1.5d", core.Per(1, 36*time.Hour)},
		{"1 per 366d", core.Per(1, maxWindow)},
		{"1 per 366 days", core.Per(1, maxWindow)},
		{"1 per 8784h", core.Per(1, maxWindow)},
		{"1 per 7µs", core.Per(1, 7*time.Microsecond)},
		{"1 per 7us", core.Per(1, 7*time.Microsecond)},
		{"1 per 1h0m0.5s", core.Per(1, time.Hour+500*time.Millisecond)},
		{"1 per 0.000001s", core.Per(1, time.Microsecond)},
		// ulule/limiter's formatted rates (issue 37)
		{"1000-H", core.PerHour(1000)},
		{"5-S", core.PerSecond(5)},
		{"10-M", core.PerMinute(10)},
		{" 7-D ", core.PerDay(7)},
		{"5-s", core.PerSecond(5)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLimit(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseLimitErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty limit"},
		{"   ", "empty limit"},
		{"abc per 1m", `requests: "abc" is not a positive whole number`},
		{"0 per 1m", `requests: "0" is not a positive whole number`},
		{"-5 per 1m", `requests: "-5" is not a positive whole number`},
		{"99999999999999999999 per 1m", "not a positive whole number"},
		{"10", `want "<requests> per <window>"`},
		{"10 every 1m", `want "<requests> per <window>"`},
		{"10 per", `want "<requests> per <window>"`},
		{"10 per 0s", "not a positive duration"},
		{"10 per -1m", "not a positive duration"},
		{"10 per fortnight", "not a positive duration"},
		{"10 per 3 fortnights", `unknown unit "fortnights"`},
		{"10 per 0 minutes", "window count"},
		{"10 per 1m burst", "burst needs a number"},
		{"10 per 1m burst 0", `burst: "0" is not a positive whole number`},
		{"10 per 1m burst x", `burst: "x"`},
		{"10 per 1 2 3", "window: want a duration"},
		{"10 per 0d", "not a positive duration"},
		{"10 per 99999999 days", "longer than 366 days"},
		{"1 per 213504d", "longer than 366 days"},
		{"1 per 213504 days", "longer than 366 days"},
		{"1 per 367d", "longer than 366 days"},
		{"1 per 8785h", "longer than 366 days"},
		{"1 per 9223372036854775807ns", "longer than 366 days"},
		{"1 per 99999999999999999999h", "longer than 366 days"},
		{"1 per 366d1ns", "longer than 366 days"},
		{"1 per 1500ns", "whole number of microseconds"},
		{"1 per 1.0000005ms", "whole number of microseconds"},
		{"1 per 0.5ns", "whole number of microseconds"},
		{"1 per 1m-1s", "not a positive duration"},
		{"1 per 1..5s", "not a positive duration"},
		{"1 per .s", "not a positive duration"},
		{"1 per 1x", "not a positive duration"},
		{strings.Repeat("1", 200), "longer than 128 bytes"},
		{"1000-W", `unknown period "W" in ulule/limiter's form "<requests>-<S|M|H|D>"`},
		{"0-H", `requests: "0" is not a positive whole number`},
		{"1000-HOUR", `ulule/limiter's form is "<requests>-<S|M|H|D>", e.g. "1000-H"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseLimit(tt.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestLimitStringRoundTrip guards the property the encoders rely on:
// core.Limit.String parses back to the same limit.
func TestLimitStringRoundTrip(t *testing.T) {
	for _, l := range []core.Limit{
		core.Per(900, 15*time.Minute), core.PerDay(5), core.Per(3, 1500*time.Millisecond),
		core.PerSecond(10).WithBurst(20), core.Per(1, 90*time.Minute), core.Per(7, time.Microsecond*7),
		core.Per(1, 25*time.Hour+time.Second),
	} {
		got, err := ParseLimit(l.String())
		require.NoError(t, err, l.String())
		assert.Equal(t, l, got, l.String())
	}
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"900 per 15m", "10 per minute", "100/s", "10 per 1s burst 20", "5 per 7d", "250 per 15 minutes", "1 per 1h0m0.5s", "x", "1 per 1 1",
		"5 per calendar month", "5 per calendar week in Europe/Berlin from sunday", "5 / calendar day in America/New_York", "5 per calendar year in UTC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLimit(s)
		if err != nil {
			return
		}
		if l.Requests <= 0 || l.Window <= 0 || l.Burst < 0 {
			t.Fatalf("ParseLimit(%q) = %+v: accepted a non-positive field", s, l)
		}
		if l.Window > maxWindow || l.Window%time.Microsecond != 0 {
			t.Fatalf("ParseLimit(%q) = %+v: window above 366 days or not whole microseconds", s, l)
		}
		// The canonical form parses back to the same limit.
		if l.Burst == l.Requests {
			l.Burst = 0
		}
		back, err := ParseLimit(l.String())
		if err != nil {
			t.Fatalf("ParseLimit(%q) = %v; its String %q does not parse: %v", s, l, l.String(), err)
		}
		// (a calendar limit's zone is loaded again: a new pointer, the
		// same name, which String shows)
		if back != l && (!isCalendar(l) || back.String() != l.String()) {
			t.Fatalf("ParseLimit(%q) = %+v; String %q parses to %+v", s, l, l.String(), back)
		}
	})
}

// FuzzWindowCount guards against overflow in the window arithmetic
// (TestParseLimitErrors "1 per 213504d" loaded as 25m26s): for any count
// and unit, the parsed window is exactly count × unit, computed here in
// big integers, or an error when that exceeds maxWindow.
func FuzzWindowCount(f *testing.F) {
	f.Add(uint64(213504), uint8(3), false)
	f.Add(uint64(366), uint8(3), true)
	f.Add(uint64(1)<<63, uint8(0), false)
	f.Add(uint64(106752), uint8(3), true)
	type unit struct {
		word, short string
		d           time.Duration
	}
	unitList := []unit{{"seconds", "s", time.Second}, {"minutes", "m", time.Minute}, {"hours", "h", time.Hour}, {"days", "d", 24 * time.Hour}, {"", "ms", time.Millisecond}, {"", "us", time.Microsecond}}
	f.Fuzz(func(t *testing.T, n uint64, ui uint8, word bool) {
		u := unitList[int(ui)%len(unitList)]
		s := fmt.Sprintf("1 per %d%s", n, u.short)
		if word && u.word != "" {
			s = fmt.Sprintf("1 per %d %s", n, u.word)
		}
		want := new(big.Int).Mul(new(big.Int).SetUint64(n), big.NewInt(int64(u.d)))
		l, err := ParseLimit(s)
		if n == 0 || want.Cmp(big.NewInt(int64(maxWindow))) > 0 {
			if err == nil {
				t.Fatalf("ParseLimit(%q) = %v, want an error (window 0 or above 366 days)", s, l)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseLimit(%q): %v", s, err)
		}
		if big.NewInt(int64(l.Window)).Cmp(want) != 0 {
			t.Fatalf("ParseLimit(%q) window = %v, want %v ns", s, l.Window, want)
		}
	})
}
