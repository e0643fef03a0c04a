package rules

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
)

var _ tableStore = memstore.Store(nil)

var liveT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// setAB is one of two rule sets that differ in the limits of r1 and r2
// (and the algorithm of r2), while r3 is the same in both.
func setAB(t *testing.T, b bool) *Set {
	r1, r2, alg := 1_000_000, 2_000_000, "gcra"
	if b {
		r1, r2, alg = 3_000_000, 4_000_000, "fixed_window"
	}
	return mustParse(t, fmt.Sprintf(`
rules:
  - {name: r1, route: /a, limits: ["%d per 1h"]}
  - {name: r2, route: /b, algorithm: %s, limits: ["%d per 1h"]}
  - {name: r3, route: /c, limits: ["10000000 per 1h"]}
`, r1, alg, r2))
}

// TestLiveNoHalfAppliedSet: requests in flight across 1,000 swaps between
// two sets are each decided wholly by one set: a request that consults two
// rules' limiters (a hybrid decision) sees both limits of one set, the set
// of its snapshot's generation (odd: A, even: B), and the per-rule value
// built with them; no request fails on the store (the embedded store
// refuses a same-named policy of other limits unless it was replaced);
// the rule that is the same in both sets keeps an exact count through
// every swap; and once the requests are done the store holds no table set
// aside for old requests.
func TestLiveNoHalfAppliedSet(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(liveT0)
	sets := [2]*Set{setAB(t, false), setAB(t, true)}
	build := func(r *Rule, ls Limiters) (string, error) {
		return fmt.Sprintf("%s=%d", r.Name, ls.Default.Policy().Limits[0].Requests), nil
	}
	live, err := NewLive(store, sets[0], build, core.WithClock(clock))
	require.NoError(t, err)

	const reloads = 1000
	workers := 4
	var done atomic.Bool
	var requests, r3Allowed, gensSeen, straddled atomic.Int64
	var lastGen atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for !done.Load() {
				snap := live.Acquire()
				gen := snap.gen
				want := [2]int64{1_000_000, 2_000_000}
				if gen%2 == 0 {
					want = [2]int64{3_000_000, 4_000_000}
				}
				var got [2]int64
				for i, path := range []string{"/a", "/b"} {
					r := snap.Set().Match("GET", path, false)
					d, err := snap.Limiter(r).Allow(ctx, "client")
					h, _ := snap.Handler(r)
					if err != nil || !d.Allowed || d.Degraded || h != fmt.Sprintf("%s=%d", r.Name, d.Limit.Requests) {
						errs <- fmt.Errorf("gen %d (current %d) %s: %+v, %v, handler %q", gen, live.Generation(), path, d, err, h)
						snap.Release()
						return
					}
					got[i] = d.Limit.Requests
				}
				d, err := snap.Limiter(snap.Set().Match("GET", "/c", false)).Allow(ctx, "client")
				if live.Generation() != gen {
					straddled.Add(1) // a swap happened while this request was deciding
				}
				snap.Release()
				if got != want || err != nil {
					errs <- fmt.Errorf("gen %d: limits %v, want %v (a half-applied set), r3 err %v", gen, got, want, err)
					return
				}
				if d.Allowed {
					r3Allowed.Add(1)
				}
				if lastGen.Swap(gen) != gen {
					gensSeen.Add(1)
				}
				requests.Add(1)
				runtime.Gosched() // leave the swapper CPU time on a small machine
			}
		}()
	}
	for i := 1; i <= reloads; i++ {
		_, err := live.Swap(sets[i%2])
		require.NoError(t, err)
		for n := requests.Load(); requests.Load() == n && len(errs) == 0; {
			// let a request through between swaps, so that requests
			// straddle them
			runtime.Gosched()
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, uint64(reloads+1), live.Generation())
	n := requests.Load()
	t.Logf("%d requests across %d swaps, %d of them in flight across a swap; generation changed %d times between consecutive requests",
		n, reloads, straddled.Load(), gensSeen.Load())
	assert.GreaterOrEqual(t, n, int64(reloads))
	assert.Positive(t, straddled.Load(), "some requests were in flight across a swap")
	assert.Equal(t, n, r3Allowed.Load())

	snap := live.Acquire()
	d, err := snap.Limiter(snap.Set().Match("GET", "/c", false)).Allow(context.Background(), "client")
	snap.Release()
	require.NoError(t, err)
	assert.Equal(t, 10_000_000-n-1, d.Remaining, "r3 counted every request exactly, across every swap")
	assert.Equal(t, 3, store.Stats().Policies, "no table is held aside once the requests are done")
}

// takeRule decides n requests of key under rule name in the current
// snapshot and returns the allowed count and the last decision.
func takeRule[H any](t *testing.T, live *Live[H], name, key string, n int) (int, core.Decision) {
	t.Helper()
	snap := live.Acquire()
	defer snap.Release()
	r, ok := snap.Set().Rule(name)
	require.True(t, ok, name)
	allowed := 0
	var d core.Decision
	for i := 0; i < n; i++ {
		var err error
		d, err = snap.Limiter(r).Allow(context.Background(), key)
		require.NoError(t, err)
		require.False(t, d.Degraded)
		if d.Allowed {
			allowed++
		}
	}
	return allowed, d
}

const stateV1 = `
rules:
  - {name: keep, route: /keep, limits: ["10 per 1h"]}
  - {name: moved, route: /old, limits: ["10 per 1h"]}
  - {name: failmode, route: /fm, limits: ["10 per 1h"]}
  - {name: change, route: /change, limits: ["10 per 1h", "5 per 1m"]}
  - {name: gone, route: /gone, limits: ["10 per 1h"]}
descriptors:
  - {domain: auth, key: login, unit: minute, requests: 3}
`

const stateV2 = `
rules:
  - {name: keep, route: /keep, limits: ["10 per 1h"]}
  - {name: moved, route: /new, methods: [GET], limits: ["10 per 1h"]}
  - {name: failmode, route: /fm, fail_mode: closed, limits: ["10 per 1h"]}
  - {name: change, route: /change, limits: ["10 per 1h", "8 per 1m"]}
  - {name: added, route: /added, limits: ["2 per 1h"]}
descriptors:
  - {domain: auth, key: login, unit: minute, requests: 3}
`

// TestLiveStateAcrossSwapMemstore: on the embedded store, rules whose
// name and limits did not change keep every key's exact count across a
// swap (the same Limiter, or a new one on the same table when only the
// fail mode changed), and a rule whose limits changed starts afresh:
// every limit at its full quota.
func TestLiveStateAcrossSwapMemstore(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(liveT0)
	live, err := NewLive[struct{}](store, mustParse(t, stateV1), nil, core.WithClock(clock))
	require.NoError(t, err)
	for _, name := range []string{"keep", "moved", "failmode", "change", "gone"} {
		n, _ := takeRule(t, live, name, "alice", 4)
		require.Equal(t, 4, n, name)
	}
	snap := live.Acquire()
	_, login := snap.Descriptor("auth", "login")
	_, err = login.Allow(context.Background(), "bob")
	require.NoError(t, err)
	oldKeep := snap.Limiter(snap.Set().Match("GET", "/keep", false))
	snap.Release()

	ch, err := live.Swap(mustParse(t, stateV2))
	require.NoError(t, err)
	assert.Equal(t, []string{"added"}, ch.Added)
	assert.Equal(t, []string{"gone"}, ch.Removed)
	assert.Equal(t, []LimitChange{{Name: "change", Old: "gcra 10 per 1h, 5 per 1m", New: "gcra 10 per 1h, 8 per 1m"}}, ch.LimitsChanged)
	assert.ElementsMatch(t, []string{"failmode", "moved"}, ch.Updated)
	assert.Equal(t, 2, ch.Unchanged, "keep and auth/login")
	assert.Equal(t, `added [added]; removed [gone]; limits changed [change: gcra 10 per 1h, 5 per 1m -> gcra 10 per 1h, 8 per 1m]; updated [moved failmode]; 2 unchanged`, ch.String())

	snap = live.Acquire()
	assert.Same(t, oldKeep, snap.Limiter(snap.Set().Match("GET", "/keep", false)), "an equal policy keeps its Limiter")
	assert.Nil(t, snap.Set().Match("GET", "/old", false))
	assert.Equal(t, "moved", snap.Set().Match("GET", "/new", false).Name)
	_, login = snap.Descriptor("auth", "login")
	d, err := login.Allow(context.Background(), "bob")
	snap.Release()
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Remaining, "descriptor: 3 - 2")

	for _, name := range []string{"keep", "moved", "failmode"} {
		n, d := takeRule(t, live, name, "alice", 7)
		assert.Equal(t, 6, n, "%s: 4 of 10 were spent before the swap", name)
		assert.False(t, d.Allowed)
	}
	n, d := takeRule(t, live, "change", "alice", 9)
	assert.Equal(t, 8, n, "change: fresh under 10 per 1h and 8 per 1m (4 spent before are forgotten)")
	assert.Equal(t, int64(8), d.Limit.Requests)
	n, _ = takeRule(t, live, "added", "alice", 3)
	assert.Equal(t, 2, n)
}

// TestLiveChangedRuleStartsAfreshMemstore: on the embedded store, for
// every algorithm, a changed rule starts with every limit fresh (even the
// one that did not change), while the unchanged rule keeps its count.
func TestLiveChangedRuleStartsAfreshMemstore(t *testing.T) {
	for _, alg := range []string{"gcra", "token_bucket", "fixed_window", "sliding_log", "sliding_counter"} {
		t.Run(alg, func(t *testing.T) {
			store := memstore.MustNew()
			defer store.Close()
			withAlg := func(src string) *Set {
				return mustParse(t, strings.Replace(src, "rules:\n", "defaults: {algorithm: "+alg+"}\nrules:\n", 1))
			}
			live, err := NewLive[struct{}](store, withAlg(stateV1), nil, core.WithClock(core.NewManualClock(liveT0)))
			require.NoError(t, err)
			for _, name := range []string{"keep", "change"} {
				n, _ := takeRule(t, live, name, "alice", 4)
				require.Equal(t, 4, n)
			}
			_, err = live.Swap(withAlg(stateV2))
			require.NoError(t, err)
			n, _ := takeRule(t, live, "keep", "alice", 7)
			assert.Equal(t, 6, n)
			n, d := takeRule(t, live, "change", "alice", 9)
			assert.Equal(t, 8, n, "fresh: the hour limit's 4 are forgotten too, the new minute limit binds")
			assert.Equal(t, int64(8), d.Limit.Requests)
		})
	}
}

// TestLiveStateAcrossSwapRedis: on Redis a changed rule keeps the state of
// each limit that is unchanged at its position (its key carries a digest
// of the limit) and starts the changed limits afresh; unchanged rules
// keep their exact count. Every algorithm.
func TestLiveStateAcrossSwapRedis(t *testing.T) {
	srv := redistest.StartNode(t)
	client := srv.NewClient(t)
	for _, alg := range []string{"gcra", "token_bucket", "fixed_window", "sliding_log", "sliding_counter"} {
		t.Run(alg, func(t *testing.T) {
			store, err := redisstore.New(client, redisstore.WithClientTime(), redisstore.WithPrefix("t-"+alg+":"))
			require.NoError(t, err)
			clock := core.NewManualClock(liveT0)
			withAlg := func(src string) *Set {
				return mustParse(t, strings.Replace(src, "rules:\n", "defaults: {algorithm: "+alg+"}\nrules:\n", 1))
			}
			live, err := NewLive[struct{}](store, withAlg(stateV1), nil, core.WithClock(clock), core.WithTimeout(redistest.StoreTimeout))
			require.NoError(t, err)
			for _, name := range []string{"keep", "failmode", "change"} {
				n, _ := takeRule(t, live, name, "alice", 4)
				require.Equal(t, 4, n, name)
			}
			_, err = live.Swap(withAlg(stateV2))
			require.NoError(t, err)
			for _, name := range []string{"keep", "failmode"} {
				n, _ := takeRule(t, live, name, "alice", 7)
				assert.Equal(t, 6, n, "%s: 4 of 10 were spent before the swap", name)
			}
			// change: "10 per 1h" is unchanged (4 spent, 6 left), "5 per
			// 1m" became "8 per 1m" (fresh: 8); the hour limit binds
			// after 6.
			n, d := takeRule(t, live, "change", "alice", 9)
			assert.Equal(t, 6, n, "the unchanged hourly limit carried its 4 over; the new minute limit did not bind")
			assert.Equal(t, int64(10), d.Limit.Requests, "the hour limit denies")
			clock.Advance(2*time.Hour + time.Second)
			n, d = takeRule(t, live, "change", "alice", 9)
			assert.Equal(t, 8, n, "later the changed minute limit binds, at its new value")
			assert.Equal(t, int64(8), d.Limit.Requests)
		})
	}
}

// TestLiveRemovedRuleAddedBack: a rule removed and added back later with
// other limits gets a table of its own on the embedded store (no
// configuration error), starting afresh.
func TestLiveRemovedRuleAddedBack(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	v1 := mustParse(t, `rules: [{name: x, route: /x, limits: ["3 per 1h"]}, {name: y, route: /y, limits: ["1 per 1h"]}]`)
	v2 := mustParse(t, `rules: [{name: y, route: /y, limits: ["1 per 1h"]}]`)
	v3 := mustParse(t, `rules: [{name: x, route: /x, limits: ["5 per 1h"]}, {name: y, route: /y, limits: ["1 per 1h"]}]`)
	live, err := NewLive[struct{}](store, v1, nil, core.WithClock(core.NewManualClock(liveT0)))
	require.NoError(t, err)
	n, _ := takeRule(t, live, "x", "k", 3)
	require.Equal(t, 3, n)
	_, err = live.Swap(v2)
	require.NoError(t, err)
	ch, err := live.Swap(v3)
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, ch.Added)
	n, _ = takeRule(t, live, "x", "k", 6)
	assert.Equal(t, 5, n)
}

// TestLiveReloadFileInvalidKeepsOld: a file that does not validate is
// rejected with every problem and its line, and the old set keeps serving
// with its state.
func TestLiveReloadFileInvalidKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(path, []byte("rules:\n  - {name: a, route: /a, limits: [\"2 per 1h\"]}\n"), 0o600))
	store := memstore.MustNew()
	defer store.Close()
	set, err := LoadFile(path)
	require.NoError(t, err)
	live, err := NewLive[struct{}](store, set, nil, core.WithClock(core.NewManualClock(liveT0)))
	require.NoError(t, err)
	n, _ := takeRule(t, live, "a", "k", 1)
	require.Equal(t, 1, n)

	require.NoError(t, os.WriteFile(path, []byte("rules:\n  - name: a\n    route: /a\n    limits: [\"2 per fortnight\"]\n  - {name: b, route: b, limits: [\"1/s\"]}\n"), 0o600))
	_, err = live.ReloadFile(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 4")
	assert.Contains(t, err.Error(), `rules[1] "b"`)
	assert.Same(t, set, live.Current(), "the old set keeps serving")
	assert.Equal(t, uint64(1), live.Generation())
	n, _ = takeRule(t, live, "a", "k", 2)
	assert.Equal(t, 1, n, "with its state")
}

// TestSnapshotForeignRule: a rule of another snapshot's set has no
// limiter here (mixing two sets in one request is refused, not a panic).
func TestSnapshotForeignRule(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	live, err := NewLive(store, setAB(t, false), func(r *Rule, _ Limiters) (string, error) { return r.Name, nil })
	require.NoError(t, err)
	s1 := live.Acquire()
	defer s1.Release()
	_, err = live.Swap(setAB(t, true))
	require.NoError(t, err)
	s2 := live.Acquire()
	defer s2.Release()
	r1 := s1.Set().Match("GET", "/a", false)
	assert.NotNil(t, s1.Limiter(r1))
	assert.Nil(t, s2.Limiter(r1))
	_, ok := s2.Handler(r1)
	assert.False(t, ok)
	h, ok := s2.Handler(s2.Set().Match("GET", "/a", false))
	assert.True(t, ok)
	assert.Equal(t, "r1", h)
	assert.Nil(t, s2.Limiter(nil))
}

// TestLiveBuildErrorKeepsOld: an error building a rule's value rejects
// the swap; nothing is published.
func TestLiveBuildErrorKeepsOld(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	fail := false
	live, err := NewLive(store, setAB(t, false), func(r *Rule, _ Limiters) (int, error) {
		if fail && r.Name == "r2" {
			return 0, fmt.Errorf("no middleware for you")
		}
		return 1, nil
	})
	require.NoError(t, err)
	fail = true
	_, err = live.Swap(setAB(t, true))
	assert.ErrorContains(t, err, `rules: rule "r2": no middleware for you`)
	assert.Equal(t, uint64(1), live.Generation())
	_, err = NewLive[int](nil, setAB(t, false), nil)
	assert.ErrorContains(t, err, "nil store")
	_, err = NewLive[int](store, nil, nil)
	assert.ErrorContains(t, err, "nil set")
}

// BenchmarkLiveAcquireRelease is what a request pays for its snapshot.
func BenchmarkLiveAcquireRelease(b *testing.B) {
	store := memstore.MustNew()
	defer store.Close()
	live, err := NewLive[struct{}](store, Default(), nil)
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			live.Acquire().Release()
		}
	})
}

// BenchmarkLiveSwap swaps between two versions of the endpoint table that
// differ in one rule's limits.
func BenchmarkLiveSwap(b *testing.B) {
	store := memstore.MustNew()
	defer store.Close()
	a := Default()
	src, err := a.encodeYAML()
	require.NoError(b, err)
	other, err := parse([]byte(strings.Replace(string(src), "100 per 1m", "120 per 1m", 1)), syntaxYAML)
	require.NoError(b, err)
	live, err := NewLive[struct{}](store, a, nil)
	require.NoError(b, err)
	sets := [2]*Set{other, a}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := live.Swap(sets[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLiveSwapReportsEveryLimitField: a swap that changes only one of the
// fields that decide on a state (algorithm, limits, buckets,
// soft_percent, count_denied, shadow) reports the rule's limits changed
// and gives it a Limiter of the new policy; the same file again is
// unchanged.
func TestLiveSwapReportsEveryLimitField(t *testing.T) {
	const counter = `algorithm: sliding_counter, buckets: 6, `
	for _, tc := range []struct{ name, old, new string }{
		{"count_denied", ``, `count_denied: true, `},
		{"count_denied off", `count_denied: true, `, `count_denied: false, `},
		{"soft_percent", ``, `soft_percent: 20, `},
		{"shadow", ``, `shadow: true, `},
		{"algorithm", ``, `algorithm: token_bucket, `},
		{"buckets", counter, `algorithm: sliding_counter, buckets: 12, `},
		{"limits", ``, `limits: ["11 per 1m"], `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := func(extra string) *Set {
				limits := `limits: ["10 per 1m"]`
				if strings.Contains(extra, "limits:") {
					limits = ""
				}
				return mustParse(t, "rules:\n  - {name: r, route: /r, "+extra+limits+"}\n  - {name: same, route: /s, limits: [\"5 per 1m\"]}\n")
			}
			store := memstore.MustNew()
			defer store.Close()
			live, err := NewLive[struct{}](store, set(tc.old), nil, core.WithClock(core.NewManualClock(liveT0)))
			require.NoError(t, err)
			ch, err := live.Swap(set(tc.old))
			require.NoError(t, err)
			assert.Equal(t, 0, len(ch.Added)+len(ch.Removed)+len(ch.LimitsChanged)+len(ch.Updated), "the same file again: %s", ch)
			assert.Equal(t, 2, ch.Unchanged)

			want := set(tc.new)
			ch, err = live.Swap(want)
			require.NoError(t, err)
			require.Len(t, ch.LimitsChanged, 1, "%s", ch)
			assert.Equal(t, "r", ch.LimitsChanged[0].Name)
			assert.NotEqual(t, ch.LimitsChanged[0].Old, ch.LimitsChanged[0].New)
			assert.Equal(t, 1, ch.Unchanged, "%s", ch)
			snap := live.Acquire()
			defer snap.Release()
			r, ok := snap.Set().Rule("r")
			require.True(t, ok)
			wr, _ := want.Rule("r")
			got, exp := snap.Limiter(r).Policy(), wr.Policy()
			assert.Equal(t, exp.CountDenied, got.CountDenied)
			assert.Equal(t, exp.SoftPercent, got.SoftPercent)
			assert.Equal(t, exp.Shadow, got.Shadow)
			assert.Equal(t, exp.Algorithm, got.Algorithm)
			assert.Equal(t, exp.Buckets, got.Buckets)
			assert.Equal(t, exp.Limits, got.Limits)
		})
	}
}
