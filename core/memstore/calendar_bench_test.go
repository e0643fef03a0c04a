package memstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
)

// BenchmarkCalendar (issue 36: calendar limits cost what a fixed window
// costs): one allowed decision of a calendar month in Europe/Berlin
// against the fixed window per minute, in the same run, serial on one
// key and in parallel on a key per goroutine. The clock moves a second
// per 1,000 decisions, so the minute window rolls over as it does in
// service (and the month's period is found by its remembered bounds).
func BenchmarkCalendar(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	pols := []core.Policy{
		{Name: "fixed_window_minute", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(1 << 30)}},
		{Name: "calendar_month", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerCalendar(1<<30, core.CalendarMonth, berlin)}},
	}
	for _, p := range pols {
		b.Run(p.Name+"/serial", func(b *testing.B) {
			s := mustNew()
			defer s.Close()
			ctx, pp := context.Background(), &p
			now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%1000 == 0 {
					now = now.Add(time.Second)
				}
				if d, _ := s.Take(ctx, "user:42", pp, now, 1); !d.Allowed {
					b.Fatal("denied")
				}
			}
		})
		b.Run(p.Name+"/parallel", func(b *testing.B) {
			s := mustNew()
			defer s.Close()
			ctx, pp := context.Background(), &p
			now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
			var g atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := "user:" + strconv.FormatInt(g.Add(1), 10)
				at := now
				i := 0
				for pb.Next() {
					if i%1000 == 0 {
						at = at.Add(time.Second)
					}
					i++
					if d, _ := s.Take(ctx, key, pp, at, 1); !d.Allowed {
						b.Fatal("denied")
					}
				}
			})
		})
	}
}
