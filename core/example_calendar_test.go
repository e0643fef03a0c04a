package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// A monthly quota in the customer's time zone: the period ends at the
// first local midnight of the next month, and a denial's RetryAfter
// points there.
func ExamplePerCalendar() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	clock := core.NewManualClock(time.Date(2026, 3, 31, 20, 0, 0, 0, berlin))
	l := core.MustNewLimiter(memstore.MustNew(), core.Policy{
		Name:      "monthly",
		Algorithm: core.FixedWindow, // calendar periods are fixed windows
		Limits:    []core.Limit{core.PerCalendar(2, core.CalendarMonth, berlin)},
	}, core.WithClock(clock))
	ctx := context.Background()
	for range 3 {
		d, _ := l.Allow(ctx, "customer:7")
		fmt.Println(d.Allowed, d.Limit, "retry after", d.RetryAfter)
	}
	clock.Advance(4 * time.Hour) // April 1, 00:00 in Berlin
	d, _ := l.Allow(ctx, "customer:7")
	fmt.Println(d.Allowed, "resets", clock.Now().Add(d.ResetAfter).In(berlin).Format(time.DateTime))
	// Output:
	// true 2 per calendar month in Europe/Berlin retry after 0s
	// true 2 per calendar month in Europe/Berlin retry after 0s
	// false 2 per calendar month in Europe/Berlin retry after 4h0m0s
	// true resets 2026-05-01 00:00:00
}

// A week that starts on Sunday, in UTC (a nil zone).
func ExampleLimit_WithWeekStart() {
	weekly := core.PerCalendar(100, core.CalendarWeek, nil).WithWeekStart(time.Sunday)
	p := core.Policy{Name: "weekly", Algorithm: core.FixedWindow, Limits: []core.Limit{weekly}}
	c, err := p.Compile()
	if err != nil {
		panic(err)
	}
	_, start, end, _ := c.CalendarPeriod(0, time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC).UnixMicro())
	fmt.Println(weekly)
	fmt.Println(time.UnixMicro(start).UTC().Format(time.DateOnly), "to", time.UnixMicro(end).UTC().Format(time.DateOnly))
	// Output:
	// 100 per calendar week from sunday
	// 2026-12-27 to 2027-01-03
}
