package schedlag

import (
	"testing"
	"time"
)

// TestLagSinceCountsOnlyWakeUpsAfterStart: a recorded lag counts for the
// calls that were under way when it was seen, not for later ones; lags
// under minLag are not recorded.
func TestLagSinceCountsOnlyWakeUpsAfterStart(t *testing.T) {
	p := New() // no loop: only what is recorded by hand
	p.Record(int64(100*time.Millisecond), 40*time.Millisecond)
	p.Record(int64(200*time.Millisecond), 10*time.Millisecond)
	p.Record(int64(300*time.Millisecond), minLag/2)
	for _, c := range []struct {
		start int64
		want  time.Duration
	}{
		{0, 40 * time.Millisecond},
		{int64(100 * time.Millisecond), 40 * time.Millisecond},
		{int64(150 * time.Millisecond), 10 * time.Millisecond},
		{int64(250 * time.Millisecond), 0},
	} {
		if got := p.LagSince(c.start); got != c.want {
			t.Errorf("LagSince(%v) = %v, want %v", time.Duration(c.start), got, c.want)
		}
	}
}

// TestLagSinceSeesAnOverdueLoop: a loop that has not woken for longer
// than a tick reports how overdue it is, before it wakes to record it.
func TestLagSinceSeesAnOverdueLoop(t *testing.T) {
	p := New()
	p.last.Store(p.Now() - int64(time.Second)) // as if the loop last woke 1 s ago
	if got := p.LagSince(p.Now()); got < time.Second-Tick {
		t.Errorf("LagSince = %v with the loop 1 s overdue", got)
	}
}

// TestSharedStopsWhenIdle: Shared's loop runs while read and stops once
// nobody reads it (no goroutine left behind), and Shared starts it again.
func TestSharedStopsWhenIdle(t *testing.T) {
	p := Shared()
	deadline := time.Now().Add(10 * time.Second)
	for p.last.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Shared's loop did not start")
		}
		time.Sleep(time.Millisecond)
	}
	deadline = time.Now().Add(5*idle + 10*time.Second)
	for p.last.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Shared's loop did not stop with no reader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if Shared(); !waitRunning(p) {
		t.Fatal("Shared did not start its loop again")
	}
}

func waitRunning(p *Probe) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p.last.Load() != 0 {
			return true
		}
	}
	return false
}

// TestMoveDeadline: a deadline moves later by the recorded wait to run,
// by at most MaxMove times the time left; not at all with no wait, nor a
// zero or passed deadline.
func TestMoveDeadline(t *testing.T) {
	p := New()
	dl := time.Now().Add(time.Second)
	if got := p.Move(dl); !got.Equal(dl) {
		t.Errorf("no wait: moved by %v", got.Sub(dl))
	}
	p.Record(p.Now(), 20*time.Millisecond)
	if got := p.Move(dl); got.Sub(dl) != 20*time.Millisecond {
		t.Errorf("a 20 ms wait: moved by %v", got.Sub(dl))
	}
	p.Record(p.Now(), 10*time.Second)
	if got := p.Move(dl).Sub(dl); got > MaxMove*time.Second || got < (MaxMove-1)*time.Second {
		t.Errorf("a 10 s wait: moved by %v, want about %d s", got, MaxMove)
	}
	if past := time.Now().Add(-time.Second); !p.Move(past).Equal(past) {
		t.Error("a passed deadline moved")
	}
	if !p.Move(time.Time{}).IsZero() {
		t.Error("a zero deadline moved")
	}
}

// TestLagSinceAfterTwoWeeks: a process up for weeks still sees its
// wake-ups. A slot kept the wake-up's time in µs in 40 bits, which wrap
// after 12.7 days: past that every recorded lag read as older than any
// call, forgiveness and the moved deadline stopped silently.
func TestLagSinceAfterTwoWeeks(t *testing.T) {
	p := New()
	for _, up := range []time.Duration{13 * 24 * time.Hour, 400 * 24 * time.Hour} {
		at := int64(up)
		p.Record(at, 30*time.Millisecond)
		if got := p.LagSince(at - int64(10*time.Millisecond)); got != 30*time.Millisecond {
			t.Errorf("up %v: LagSince just before the wake-up = %v, want 30ms", up, got)
		}
		if got := p.LagSince(at + int64(10*time.Millisecond)); got != 0 {
			t.Errorf("up %v: LagSince after the wake-up = %v, want 0", up, got)
		}
	}
}

// TestMoveBlindUntilWatched: a probe whose loop starts on demand (Shared's)
// cannot know the process's wait before its loop has watched for a
// Window: until then Move moves a deadline by the most (MaxMove times
// the time left), as for a starved process; once the loop has watched a
// Window and seen no wait, not at all. A probe run by its owner (New) is
// never blind.
func TestMoveBlindUntilWatched(t *testing.T) {
	const left = 10 * time.Second
	moved := func(p *Probe) time.Duration {
		dl := time.Now().Add(left)
		return p.Move(dl).Sub(dl)
	}
	// the most: MaxMove times what is left of the deadline when Move
	// reads the clock, a little under MaxMove × left
	most := func(d time.Duration) bool { return d > (MaxMove-1)*left && d <= MaxMove*left }

	p := NewOnDemand()
	if d := moved(p); !most(d) {
		t.Errorf("loop not running: moved by %v; want about %v", d, MaxMove*left)
	}
	// a loop that has just started, and last woke "ahead" of the test's
	// clock reads, so that the test's own scheduling delays never read as
	// an overdue loop
	p.since.Store(p.Now())
	p.last.Store(p.Now() + int64(time.Hour))
	if d := moved(p); !most(d) {
		t.Errorf("loop started less than a Window ago: moved by %v; want about %v", d, MaxMove*left)
	}
	p.since.Store(p.Now() - int64(Window))
	if d := moved(p); d != 0 {
		t.Errorf("loop watched a Window, no wait seen: moved by %v; want 0", d)
	}
	p.peak.Store(int64(20 * time.Millisecond)) // the loop saw a 20 ms wait
	if d := moved(p); d != 20*time.Millisecond {
		t.Errorf("watched, a 20 ms wait: moved by %v; want 20ms", d)
	}

	owned := New() // the fleet tier's: run by its owner, never blind
	if d := moved(owned); d != 0 {
		t.Errorf("an owned probe not running: moved by %v; want 0", d)
	}
	if !Shared().blind {
		t.Error("Shared's probe must be blind until its loop has watched")
	}
}
