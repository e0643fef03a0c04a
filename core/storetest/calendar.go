package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// calendarPolicies are the calendar limits (core.PerCalendar) the suite
// walks across their boundaries: daylight-saving changes, a leap day, a
// year end, an ISO week spanning it.
func calendarPolicies(t *testing.T) []core.Policy {
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		require.NoError(t, err)
		return loc
	}
	ny, berlin, lh := zone("America/New_York"), zone("Europe/Berlin"), zone("Australia/Lord_Howe")
	return []core.Policy{
		{Name: "cal-day", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(3, core.CalendarDay, ny)}},
		{Name: "cal-day-lh", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(2, core.CalendarDay, lh)}},
		{Name: "cal-week", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(5, core.CalendarWeek, berlin)}},
		{Name: "cal-week-sun", Algorithm: core.FixedWindow, CountDenied: true, Limits: []core.Limit{core.PerCalendar(4, core.CalendarWeek, nil).WithWeekStart(time.Sunday)}},
		{Name: "cal-month", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(6, core.CalendarMonth, berlin)}},
		{Name: "cal-year", Algorithm: core.FixedWindow, SoftPercent: 50, Limits: []core.Limit{core.PerCalendar(8, core.CalendarYear, ny)}},
		{Name: "cal-2", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(7, core.CalendarMonth, ny), core.PerCalendar(3, core.CalendarDay, ny), core.PerMinute(2)}},
	}
}

// calendarStarts are instants a little before boundaries worth crossing.
var calendarStarts = []time.Time{
	time.Date(2026, 3, 7, 20, 0, 0, 0, time.UTC),   // New York's March DST (Mar 8), Berlin's (Mar 29) later
	time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC), // New York's November DST, Berlin's October one just before
	time.Date(2028, 2, 27, 12, 0, 0, 0, time.UTC),  // the leap day
	time.Date(2026, 12, 29, 12, 0, 0, 0, time.UTC), // the year end, an ISO week across it
	time.Date(2026, 10, 3, 10, 0, 0, 0, time.UTC),  // Lord Howe's 30-minute DST (Oct 4)
}

// testCalendar drives each calendar policy from each start across its
// boundaries (random steps of minutes to hours, and the boundaries
// themselves to the microsecond) and compares every decision with core's
// model; then it hammers one key of a calendar month and expects exactly
// its limit (over Options.Stores store instances).
func testCalendar(t *testing.T, f Factory, o Options) {
	for _, p := range calendarPolicies(t) {
		t.Run(p.Name, func(t *testing.T) {
			s := f(t)
			c, err := p.Compile()
			require.NoError(t, err)
			ctx := context.Background()
			for si, start := range calendarStarts {
				key := "k" + string(rune('a'+si))
				rng := rand.New(rand.NewPCG(uint64(si), 36))
				state := make([]int64, c.StateWords())
				now := start
				for i := 0; i < o.Steps/3; i++ {
					switch rng.IntN(4) {
					case 0: // onto a boundary: a µs before, at, or after it
						_, _, end, _ := c.CalendarPeriod(0, now.UnixMicro())
						now = time.UnixMicro(end + int64(rng.IntN(3)) - 1)
					case 1:
						now = now.Add(time.Duration(rng.IntN(90)) * time.Minute)
					default:
						now = now.Add(time.Duration(rng.IntN(600)) * time.Second)
					}
					cost := int64(rng.IntN(3))
					want := c.Decide(state, now.UnixMicro(), cost)
					got, err := s.Take(ctx, key, &p, now, cost)
					require.NoError(t, err)
					got.Cached = false
					require.Equal(t, want, got, "step %d at %v cost %d", i, now.UTC(), cost)
				}
			}
		})
	}
	t.Run("ExactUnderConcurrency", func(t *testing.T) {
		berlin, err := time.LoadLocation("Europe/Berlin")
		require.NoError(t, err)
		limit := int64(o.Goroutines * o.Calls / 2)
		p := core.Policy{Name: "cal-exact", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(limit, core.CalendarMonth, berlin)}}
		stores := make([]core.Store, o.Stores)
		for i := range stores {
			stores[i] = f(t)
		}
		// the last day of a month, then the first of the next: each month
		// admits exactly its limit (not its last µs: a store on the
		// caller's clock, as Redis under WithClientTime, expires keys by
		// its own, and the state would end while the test runs)
		for _, at := range []time.Time{time.Date(2026, 4, 30, 12, 0, 0, 0, berlin), time.Date(2026, 5, 1, 12, 0, 0, 0, berlin)} {
			var admitted atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Value
			for g := 0; g < o.Goroutines; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					s := stores[g%len(stores)]
					for i := 0; i < o.Calls; i++ {
						d, err := s.Take(context.Background(), "hot", &p, at, 1)
						if err != nil {
							failed.Store(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}(g)
			}
			wg.Wait()
			if err, ok := failed.Load().(error); ok {
				t.Fatal(err)
			}
			assert.Equal(t, limit, admitted.Load(), at)
		}
	})
}
