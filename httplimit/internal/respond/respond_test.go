package respond

import (
	"encoding/json"
	"math"
	"math/rand"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

func TestCeilSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0}, {0, 0}, {time.Nanosecond, 1}, {time.Second, 1},
		{time.Second + time.Nanosecond, 2}, {30 * time.Second, 30}, {29999 * time.Millisecond, 30},
		{core.Never, 9223372037},
	} {
		assert.Equal(t, tc.want, CeilSeconds(tc.d), "%v", tc.d)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
		ok   bool
	}{
		{0, 0, false}, {-1, 0, false}, {core.Never, 0, false},
		{time.Microsecond, 1, true}, {time.Second, 1, true}, {1500 * time.Millisecond, 2, true},
		{30 * time.Second, 30, true}, {core.Never - 1, 9223372037, true},
	} {
		got, ok := RetryAfterSeconds(tc.d)
		assert.Equal(t, tc.ok, ok, "%v", tc.d)
		assert.Equal(t, tc.want, got, "%v", tc.d)
	}
}

func TestEpochSeconds(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	assert.Equal(t, int64(1_700_000_000), EpochSeconds(t0, 0))
	assert.Equal(t, int64(1_700_000_001), EpochSeconds(t0.Add(time.Microsecond), 0), "rounded up")
	assert.Equal(t, int64(1_700_000_000), EpochSeconds(t0.Add(999*time.Nanosecond), 0), "the stores' microseconds")
	// a reset on a second (a calendar period's midnight), d worked out by
	// a store from the reading in whole microseconds, as memstore and
	// Redis do: exactly that second, whatever the reading's nanoseconds
	now := time.Unix(1_795_931_731, 456_789_123)
	boundary := time.Unix(1_796_079_600, 0)
	d := time.Duration(boundary.UnixMicro()-now.UnixMicro()) * time.Microsecond
	assert.Equal(t, boundary.Unix(), EpochSeconds(now, d), "a boundary is its own second")
	assert.Equal(t, int64(1_700_000_030), EpochSeconds(t0, 30*time.Second))
	assert.Equal(t, int64(1_700_000_031), EpochSeconds(t0.Add(500*time.Millisecond), 30*time.Second+time.Millisecond))
	assert.Equal(t, int64(1_700_000_000), EpochSeconds(t0, -time.Hour), "negative is now")
	big := EpochSeconds(t0, core.Never)
	assert.Equal(t, t0.Add(maxEpochOffset).Unix(), big, "capped, no overflow")
}

// TestEpochSecondsCeil: EpochSeconds is now (in whole microseconds) + d
// rounded up to the second, as time's own arithmetic computes it, for instants and
// durations on both sides of a second's boundary.
func TestEpochSecondsCeil(t *testing.T) {
	nanos := []int{0, 1, 499_999_999, 500_000_000, 999_999_999}
	ds := []time.Duration{0, 1, time.Second - 1, time.Second, time.Second + 1, 1500 * time.Millisecond,
		time.Hour - 1, time.Hour, 90*24*time.Hour + 999_999_999}
	for _, ns := range nanos {
		now := time.Unix(1_700_000_000, int64(ns))
		for _, d := range ds {
			// the stores decide in whole microseconds of now
			end := time.Unix(now.Unix(), int64(ns/1000*1000)).Add(d)
			want := end.Unix()
			if end.Nanosecond() != 0 {
				want++
			}
			assert.Equal(t, want, EpochSeconds(now, d), "now +%dns, d %v", ns, d)
		}
	}
}

func TestWindowSeconds(t *testing.T) {
	assert.Equal(t, int64(1), WindowSeconds(500*time.Millisecond))
	assert.Equal(t, int64(60), WindowSeconds(time.Minute))
	assert.Equal(t, int64(91), WindowSeconds(90*time.Second+time.Millisecond))
}

func TestFields(t *testing.T) {
	var f Fields
	f.AddInt(HeaderLimit, 100)
	f.AddInt(HeaderRemaining, 0)
	f.AddStatic(HeaderPolicy, `"a";q=1;w=1`)
	f.AddStatic("Ignored", "")
	f.AddRateLimit("a", 5, 30)
	f.AddRateLimit("b", 5, -1)
	require.Equal(t, 5, f.Len())
	for name, want := range map[string]string{HeaderLimit: "100", HeaderRemaining: "0", HeaderPolicy: `"a";q=1;w=1`} {
		got, ok := f.Get(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	_, d, s := f.At(3)
	assert.Equal(t, `"a";r=5;t=30`, string(d))
	assert.Empty(t, s)
	_, d, _ = f.At(4)
	assert.Equal(t, `"b";r=5`, string(d))
	_, ok := f.Get("Missing")
	assert.False(t, ok)
}

func TestFieldsBounded(t *testing.T) {
	var f Fields
	for i := 0; i < MaxFields+5; i++ {
		f.AddInt(HeaderLimit, -9223372036854775808)
	}
	assert.LessOrEqual(t, f.Len(), MaxFields)
	for i := 0; i < f.Len(); i++ {
		_, d, _ := f.At(i)
		assert.Equal(t, "-9223372036854775808", string(d))
	}
	var g Fields
	g.AddRateLimit(strings.Repeat("x", 101), 1, 1)
	assert.Equal(t, 0, g.Len(), "over-long ids are dropped, never truncated")
}

func TestSetHTTP(t *testing.T) {
	var f Fields
	f.AddInt(HeaderLimit, 2)
	f.AddInt(HeaderRemaining, 1)
	f.AddInt(HeaderReset, 1700000030)
	h := http.Header{"X-Ratelimit-Limit": {"stale"}, "Other": {"kept"}}
	SetHTTP(h, &f)
	assert.Equal(t, http.Header{
		"X-Ratelimit-Limit": {"2"}, "X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"1700000030"}, "Other": {"kept"},
	}, h)
	assert.Equal(t, "1", h.Get("X-RateLimit-Remaining"), "canonical names are found case-insensitively")
	// appending to one value must not clobber its neighbour
	h.Add("X-RateLimit-Limit", "3")
	assert.Equal(t, []string{"1"}, h.Values("X-RateLimit-Remaining"))

	// more than four formatted values, and a constant one
	f.AddInt(HeaderRetryAfter, 30)
	f.AddRateLimit("api", 0, 30)
	f.AddStatic(HeaderPolicy, `"api";q=2;w=60`)
	h = http.Header{}
	SetHTTP(h, &f)
	assert.Equal(t, "30", h.Get("Retry-After"))
	assert.Equal(t, `"api";r=0;t=30`, h.Get("RateLimit"))
	assert.Equal(t, `"api";q=2;w=60`, h.Get("RateLimit-Policy"))
	assert.Equal(t, "2", h.Get("X-RateLimit-Limit"))
}

func TestSetHTTPAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	var f Fields
	f.AddInt(HeaderLimit, 2)
	f.AddInt(HeaderRemaining, 1)
	f.AddInt(HeaderReset, 1700000030)
	h := http.Header{}
	SetHTTP(h, &f)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { SetHTTP(h, &f) }))
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		var g Fields
		g.AddInt(HeaderLimit, 2)
		g.AddRateLimit("api", 1, 2)
	}))
}

func TestBodies(t *testing.T) {
	var p map[string]any
	require.NoError(t, json.Unmarshal(QuotaExceededBody(429, "api"), &p))
	assert.Equal(t, map[string]any{
		"type":              ProblemTypeQuotaExceeded,
		"title":             ProblemTitleQuotaExceeded,
		"status":            float64(429),
		"violated-policies": []any{"api"},
	}, p)
	require.NoError(t, json.Unmarshal(UnavailableBody(), &p))
	assert.Equal(t, "about:blank", p["type"])
	assert.Equal(t, float64(503), p["status"])
	// a no-key denial claims no quota: no quota-exceeded type, no policy
	p = nil
	require.NoError(t, json.Unmarshal(NoKeyBody(), &p))
	assert.Equal(t, map[string]any{
		"type":   "about:blank",
		"title":  "Forbidden",
		"status": float64(403),
		"detail": "The request carries no client identity to rate-limit it by.",
	}, p)
}

func TestLimitIDs(t *testing.T) {
	one := &core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}}
	assert.Equal(t, []string{"api"}, LimitIDs(one))
	two := &core.Policy{Name: "api", Limits: []core.Limit{core.Per(900, 15*time.Minute), core.PerMinute(200)}}
	assert.Equal(t, []string{"api-15m", "api-1m"}, LimitIDs(two))
	dup := &core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(10), core.PerMinute(20)}}
	assert.Equal(t, []string{"api-0", "api-1"}, LimitIDs(dup))
	assert.Equal(t, `"api-15m";q=900;w=900`, string(AppendPolicyItem(nil, "api-15m", two.Limits[0])))
}

func TestSmallInts(t *testing.T) {
	for _, v := range []int64{-1, 0, 1, 9, 10, 99, 100, 1023, 1024, 1 << 40, math.MinInt64, math.MaxInt64} {
		assert.Equal(t, strconv.FormatInt(v, 10), Itoa(v), "Itoa(%d)", v)
		var f Fields
		f.AddInt(HeaderRemaining, v)
		got, ok := f.Get(HeaderRemaining)
		assert.True(t, ok)
		assert.Equal(t, strconv.FormatInt(v, 10), got, "AddInt(%d)", v)
		_, dyn, static := f.At(0)
		assert.Equal(t, v >= 0 && v < SmallInts, static != "" && dyn == nil, "%d is ready-made exactly when small", v)
	}
	for v := range int64(SmallInts) {
		require.Equal(t, strconv.FormatInt(v, 10), Itoa(v))
	}
}

func TestSetHTTPConstantsShareOneAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	var f Fields
	f.AddInt(HeaderLimit, 100) // ready-made
	f.AddInt(HeaderRemaining, 99)
	f.AddInt(HeaderReset, 1700000030) // formatted
	f.AddStatic(HeaderPolicy, `"api";q=100;w=60`)
	h := http.Header{}
	SetHTTP(h, &f)
	assert.Equal(t, http.Header{
		"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"99"}, "X-Ratelimit-Reset": {"1700000030"},
		"Ratelimit-Policy": {`"api";q=100;w=60`},
	}, h)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { SetHTTP(h, &f) }))
	// each value has its own one-element slice: appending to one leaves the others
	h.Add("X-RateLimit-Limit", "7")
	assert.Equal(t, []string{"99"}, h["X-Ratelimit-Remaining"])
	assert.Equal(t, []string{"100", "7"}, h["X-Ratelimit-Limit"])
}

func TestAppendInt(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 99, 100, 101, 999, 1000, 9999, 10000, 10001, 99999, 100000, 123456789,
		1073741823, 1763840123, math.MaxInt64, math.MinInt64, -1, -10, -10000, math.MinInt64 + 1}
	for p := int64(1); p > 0 && p < math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, -p)
	}
	x := uint64(0x9E3779B97F4A7C15)
	for range 10_000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		vals = append(vals, int64(x), int64(x>>uint(x%64)))
	}
	for _, v := range vals {
		require.Equal(t, strconv.FormatInt(v, 10), string(AppendInt([]byte("x"), v))[1:], "%d", v)
	}
}

// AddEpoch writes what AddInt writes, whether the value comes from the
// shared cache (hit), replaces the entry (a miss), or is formatted in
// place (a miss after epochUpdates replacements in the same second).
func TestAddEpochMatchesAddInt(t *testing.T) {
	const now = int64(1_700_000_000)
	type step struct {
		sec, nowSec int64
		cached      bool // the value is the cache's afterwards
	}
	steps := []step{
		{now + 1, now, true}, // replaces (1)
		{now + 1, now, true}, // hit
	}
	last := now + 1
	for i := 2; i <= epochUpdates; i++ { // replaces (2) to (epochUpdates)
		last = now + 1 + 29*int64((i+1)%2) // now+30, now+1, now+30, ...: each a replacement
		steps = append(steps, step{last, now, true})
	}
	steps = append(steps,
		step{now + 31, now, false},    // budget spent: formatted in place
		step{last, now, true},         // still cached
		step{now + 31, now + 1, true}, // next second: replaces
		step{now + 31, now + 1, true}, // hit
		step{5, now + 2, true},        // a small value
		step{-3, now + 3, false},      // negative: never cached
		step{9_999_999_999_999, now + 4, true},
	)
	for _, tc := range steps {
		var f, want Fields
		f.AddEpoch(HeaderReset, tc.sec, tc.nowSec)
		want.AddInt(HeaderReset, tc.sec)
		got, ok := f.Get(HeaderReset)
		require.True(t, ok)
		w, _ := want.Get(HeaderReset)
		assert.Equal(t, w, got, "%+v", tc)
		assert.Equal(t, strconv.FormatInt(tc.sec, 10), got)
		assert.Equal(t, tc.cached, lastEpoch.Load().sec == tc.sec, "%+v", tc)
	}
}

func TestAddEpochAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	var f Fields
	for i := range epochUpdates + 1 { // spend this second's replacements
		f = Fields{}
		f.AddEpoch(HeaderReset, 1_700_000_100+int64(i%2)*100, 1_700_000_099)
	}
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		var f Fields
		f.AddEpoch(HeaderReset, 1_700_000_100, 1_700_000_099) // hit
		f.AddEpoch(HeaderReset, 1_700_000_200, 1_700_000_099) // miss, same second
	}))
}

// Every block size serves: one formatted value (the 64-byte block), two
// (80), three with Retry-After (112), and more fields than any block.
func TestSetHTTPBlockSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(f *Fields)
	}{
		{"one formatted", func(f *Fields) {
			f.AddInt(HeaderLimit, 100)
			f.AddInt(HeaderRemaining, 1_234_567_890_123_456)
			f.AddStatic(HeaderReset, "1700000030")
		}},
		{"two formatted", func(f *Fields) {
			f.AddInt(HeaderLimit, 100)
			f.AddInt(HeaderRemaining, 999_999_999_999)
			f.AddInt(HeaderReset, 1_700_000_030)
		}},
		{"seventeen digits", func(f *Fields) {
			f.AddInt(HeaderLimit, 100)
			f.AddInt(HeaderRemaining, 12_345_678_901_234_567)
			f.AddStatic(HeaderReset, "1700000030")
		}},
		{"four", func(f *Fields) {
			f.AddInt(HeaderLimit, 100_000)
			f.AddInt(HeaderRemaining, 99_999)
			f.AddInt(HeaderReset, 1_700_000_030)
			f.AddInt(HeaderRetryAfter, 3600)
		}},
		{"five", func(f *Fields) {
			f.AddInt(HeaderLimit, 100_000)
			f.AddInt(HeaderRemaining, 99_999)
			f.AddInt(HeaderReset, 1_700_000_030)
			f.AddInt(HeaderRetryAfter, 3600)
			f.AddRateLimit("api", 99_999, 3600)
		}},
	} {
		var f Fields
		tc.add(&f)
		h := http.Header{}
		SetHTTP(h, &f)
		require.Equal(t, f.Len(), len(h), tc.name)
		for i := 0; i < f.Len(); i++ {
			name, _, _ := f.At(i)
			want, _ := f.Get(name)
			assert.Equal(t, []string{want}, h[name], "%s: %s", tc.name, name)
		}
	}
}

// putInt writes what strconv does, at every digit count and sign.
func TestPutInt(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 99, 100, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, -1, -10}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, -p, -(p - 1), 10*p-1)
	}
	for _, v := range vals {
		var dst [20]byte
		n := putInt(dst[:], v)
		require.Equal(t, strconv.FormatInt(v, 10), string(dst[:n]), "%d", v)
		var f Fields
		f.AddInt(HeaderRemaining, v)
		got, _ := f.Get(HeaderRemaining)
		require.Equal(t, strconv.FormatInt(v, 10), got)
	}
}

// SetHTTPTriple's shared values: the same header map SetHTTP writes, each
// value a slice of capacity 1 (so that Header.Add on one response copies
// instead of writing into what other responses share), no allocation for
// a small remaining count and one for a larger one.
func TestSetHTTPTripleSharedValues(t *testing.T) {
	limit := Values("1000000000")
	const sec = 1_700_000_300
	for _, remaining := range []int64{0, 7, SmallInts - 1, SmallInts, 999_999_999, 1e16 - 1, 1e16, -1} {
		reset := EpochString(sec, sec-1)
		require.NotEmpty(t, reset)
		var f Fields
		f.AddStatic(HeaderLimit, limit[0])
		f.AddInt(HeaderRemaining, remaining)
		f.AddStatic(HeaderReset, reset)
		want := http.Header{}
		SetHTTP(want, &f)
		h1, h2 := http.Header{}, http.Header{}
		SetHTTPTriple(h1, limit, remaining, reset, sec)
		SetHTTPTriple(h2, limit, remaining, reset, sec)
		require.Equal(t, want, h1, "remaining %d", remaining)
		for _, name := range []string{HeaderLimit, HeaderRemaining, HeaderReset} {
			require.Equal(t, 1, cap(h1[name]), "%s, remaining %d", name, remaining)
			h1.Add(name, "x")
		}
		assert.Equal(t, want, h2, "an Add to one response changed another's, remaining %d", remaining)
		assert.Equal(t, []string{"1000000000"}, limit)
	}
	if raceEnabled {
		return // allocation counts differ under -race
	}
	reset := EpochString(sec, sec-1)
	h := http.Header{}
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { SetHTTPTriple(h, limit, 999, reset, sec) }))
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { SetHTTPTriple(h, limit, 999_999_999, reset, sec) }))
}

// The remaining count's pointer-free block (newRemBlock) stays alive and
// intact while only the header map, or only the value string, refers to
// it, across collections that reuse freed memory.
func TestSetHTTPTripleBlockSurvivesGC(t *testing.T) {
	limit := Values("1000")
	reset := EpochString(1_700_000_400, 1_700_000_399)
	hs := make([]http.Header, 200)
	for i := range hs {
		hs[i] = http.Header{}
		SetHTTPTriple(hs[i], limit, 1_000_000+int64(i), reset, 1_700_000_400)
	}
	kept := hs[7][HeaderRemaining][0] // only the string
	hs[7] = nil
	for range 3 {
		runtime.GC()
		sink := make([][]byte, 0, 1000)
		for range 1000 {
			b := make([]byte, 32)
			for j := range b {
				b[j] = 'z'
			}
			sink = append(sink, b)
		}
		runtime.KeepAlive(sink)
	}
	for i, h := range hs {
		if h != nil {
			require.Equal(t, strconv.Itoa(1_000_000+i), h.Get(HeaderRemaining))
		}
	}
	assert.Equal(t, "1000007", kept)
}

// put16Digits writes what strconv does, for every digit count, around
// every power of ten and at random, through the whole range it serves.
func TestPut16Digits(t *testing.T) {
	vals := []uint64{1, 9, 10, 99, 100, 1023, 1024, 9999, 10000, 99_999_999, 1e8, 1e8 + 1, 1e16 - 1, 1234567890123456}
	for p := uint64(1); p < 1e16; p *= 10 {
		vals = append(vals, p-1, p, p+1, 2*p-1, 5*p, 9*p+p-1)
	}
	rng := rand.New(rand.NewSource(1))
	for range 100_000 {
		vals = append(vals, uint64(rng.Int63n(1e16)), uint64(rng.Int63n(1e8)), uint64(rng.Int63n(1e4)))
	}
	for _, v := range vals {
		if v == 0 || v >= 1e16 {
			continue
		}
		var d [16]byte
		i := put16Digits(&d, v)
		require.Equal(t, strconv.FormatUint(v, 10), string(d[i:]), "%d", v)
	}
}

// TestIntText: IntText's three forms (a ready-made constant, eight digits
// at a time below 1e16, a digit pair at a time above) give strconv's text
// around every power of ten, at the edges of int64 and at random values.
func TestIntText(t *testing.T) {
	check := func(v int64) {
		var buf [20]byte
		if got, want := string(IntText(buf[:], v)), strconv.FormatInt(v, 10); got != want {
			t.Fatalf("IntText(%d) = %q, want %q", v, got, want)
		}
	}
	for p := int64(1); p > 0 && p <= 1e18; p *= 10 {
		for _, v := range []int64{p - 1, p, p + 1, -p, -p - 1} {
			check(v)
		}
	}
	for _, v := range []int64{0, SmallInts - 1, SmallInts, 1<<30 - 7, 1e16 - 1, 1e16, math.MaxInt64, math.MinInt64} {
		check(v)
	}
	r := rand.New(rand.NewSource(1))
	for range 100000 {
		check(int64(r.Uint64() >> r.Intn(64)))
	}
}

// TestAddRateLimitWritesTZero: the IETF RateLimit field carries t=0 when
// the quota resets now (a zero is a value, not an absent parameter);
// only a negative t leaves the parameter out.
func TestAddRateLimitWritesTZero(t *testing.T) {
	var f Fields
	f.AddRateLimit("api", 0, 0)
	f.AddRateLimit("api", 3, -1)
	require.Equal(t, 2, f.Len())
	_, d, _ := f.At(0)
	assert.Equal(t, `"api";r=0;t=0`, string(d))
	_, d, _ = f.At(1)
	assert.Equal(t, `"api";r=3`, string(d))
	h := http.Header{}
	var g Fields
	g.AddRateLimit("api", 0, 0)
	SetHTTP(h, &g)
	assert.Equal(t, `"api";r=0;t=0`, h.Get(HeaderRateLimit))
}
