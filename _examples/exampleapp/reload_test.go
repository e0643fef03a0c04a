package exampleapp

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

// logBuf is a slog destination the test reads.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) count(s string) int { return strings.Count(l.String(), s) }

// reloadApp starts an app on the rules in file (written with src), with a
// manual clock and its log lines in the returned buffer.
func reloadApp(t *testing.T, src string, cfg Config) (*App, *serve.Server[http.Handler], http.Handler, string, *logBuf) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, file, src)
	logs := &logBuf{}
	cfg.RulesFile = file
	app, err := New(cfg, WithClock(core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))),
		WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { app.Close() })
	srv, h, err := app.HTTPHandler()
	require.NoError(t, err)
	return app, srv, h, file, logs
}

func writeRules(t *testing.T, file, src string) {
	t.Helper()
	tmp := file + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(src), 0o600))
	require.NoError(t, os.Rename(tmp, file)) // atomically, as an operator should
}

func anonRules(limit int, extra string) string {
	return fmt.Sprintf(`
rules:
  - {name: anon, route: /*, identity: anonymous, key: ip, limits: ["%d per 1h"]}
%s`, limit, extra)
}

func TestParseFlagsWatch(t *testing.T) {
	cfg, err := ParseFlags("test", []string{"-rules", "r.yaml", "-watch", "2s"}, func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, cfg.Watch)
	_, err = ParseFlags("test", []string{"-watch", "2s"}, func(string) string { return "" })
	assert.ErrorContains(t, err, "-watch needs -rules")
	_, err = ParseFlags("test", []string{"-rules", "r.yaml", "-watch", "1ms"}, func(string) string { return "" })
	assert.ErrorContains(t, err, "-watch 1ms: want an interval of at least 10ms")
}

// TestReloadKeepsStateThroughHTTP: through the nethttp example, a reload
// that adds a rule keeps the unchanged rule's exact count; one that
// changes its limits starts it afresh, and the log says so.
func TestReloadKeepsStateThroughHTTP(t *testing.T) {
	app, srv, h, file, logs := reloadApp(t, anonRules(5, ""), Config{})
	anon := client{t: t, h: h, ip: "198.51.100.7"}
	for range 3 {
		require.Equal(t, http.StatusOK, anon.do("GET", "/x").Code)
	}

	writeRules(t, file, anonRules(5, `  - {name: api3, methods: [GET], route: /api3, identity: anonymous, key: ip, limits: ["10 per 1h"]}`))
	ch, err := app.ReloadRules(srv.Live())
	require.NoError(t, err)
	assert.Equal(t, []string{"api3"}, ch.Added)
	assert.Equal(t, 1, ch.Unchanged)
	n, denied := anon.sendUntilDenied("GET", "/x", 10)
	assert.Equal(t, 2, n, "anon kept its count: 3 of 5 spent before the reload")
	require.NotNil(t, denied)
	assert.Equal(t, "10", anon.do("GET", "/api3").Header().Get("X-RateLimit-Limit"), "the added rule serves")
	assert.Contains(t, logs.String(), `msg="rules reloaded"`)
	assert.Contains(t, logs.String(), `changes="added [api3]; 1 unchanged"`)

	writeRules(t, file, anonRules(4, ""))
	ch, err = app.ReloadRules(srv.Live())
	require.NoError(t, err)
	assert.Equal(t, []rules.LimitChange{{Name: "anon", Old: "gcra 5 per 1h", New: "gcra 4 per 1h"}}, ch.LimitsChanged)
	assert.Equal(t, []string{"api3"}, ch.Removed)
	n, denied = anon.sendUntilDenied("GET", "/x", 10)
	assert.Equal(t, 4, n, "anon's limits changed: it starts afresh on the embedded store")
	require.NotNil(t, denied)
	assert.Equal(t, "4", denied.Header().Get("X-RateLimit-Limit"))
	assert.Contains(t, logs.String(), `msg="rule limits changed" rule=anon old="gcra 5 per 1h" new="gcra 4 per 1h" state="starts afresh`)
	assert.Equal(t, uint64(3), srv.Live().Generation(), "the set served first, two reloads")
}

// TestReloadInvalidFileKeepsOld: a file that does not validate is
// rejected with every problem logged, with its line, and the rules
// serving keep serving with their state; so is a file that went missing.
func TestReloadInvalidFileKeepsOld(t *testing.T) {
	app, srv, h, file, logs := reloadApp(t, anonRules(5, ""), Config{})
	anon := client{t: t, h: h, ip: "198.51.100.8"}
	for range 2 {
		require.Equal(t, http.StatusOK, anon.do("GET", "/x").Code)
	}
	gen := srv.Live().Generation()
	before := srv.Live().Current()

	writeRules(t, file, "rules:\n  - name: anon\n    route: /*\n    limts: [\"5 per 1h\"]\n  - {name: b, route: /b, limits: [\"3 per fortnight\"]}\n")
	_, err := app.ReloadRules(srv.Live())
	require.Error(t, err)
	out := logs.String()
	assert.Contains(t, out, `level=ERROR msg="rules reload rejected: the previous rules keep serving"`)
	assert.Contains(t, out, `line 4: rules[0] \"anon\": unknown field \"limts\" (did you mean \"limits\"?)`)
	assert.Contains(t, out, `line 5: rules[1] \"b\"`)
	assert.Same(t, before, srv.Live().Current())
	assert.Equal(t, gen, srv.Live().Generation())
	n, denied := anon.sendUntilDenied("GET", "/x", 10)
	assert.Equal(t, 3, n, "the old rule keeps serving, with its count")
	require.NotNil(t, denied)

	require.NoError(t, os.Remove(file))
	_, err = app.ReloadRules(srv.Live())
	assert.ErrorContains(t, err, "no such file")
	assert.Contains(t, logs.String(), `msg="rules reload failed: the previous rules keep serving"`)
	assert.Same(t, before, srv.Live().Current())
}

// TestReloadWithoutRulesFile: the embedded table has nothing to reload;
// a reload says so and changes nothing.
func TestReloadWithoutRulesFile(t *testing.T) {
	logs := &logBuf{}
	app, err := New(Config{}, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	require.NoError(t, err)
	defer app.Close()
	srv, _, err := app.HTTPHandler()
	require.NoError(t, err)
	gen := srv.Live().Generation()
	_, err = app.ReloadRules(srv.Live())
	assert.ErrorContains(t, err, "no -rules file")
	assert.Equal(t, gen, srv.Live().Generation())
	assert.Contains(t, logs.String(), "nothing to reload")

	var none *rules.Live[http.Handler]
	_, err = app.ReloadRules(none)
	assert.ErrorContains(t, err, "nil Server", "an error, not a panic")
	_, err = app.ReloadRules(nil)
	assert.ErrorContains(t, err, "nil Server")
}

// TestWatchPoll drives the watcher's check directly: it reloads when the
// content changes, not otherwise; a file that does not validate, or is
// missing, is logged once until it changes again.
func TestWatchPoll(t *testing.T) {
	app, srv, _, file, logs := reloadApp(t, anonRules(5, ""), Config{Watch: time.Second})
	gen := srv.Live().Generation()
	assert.False(t, app.poll(srv.Live()), "the file New loaded is not reloaded")
	writeRules(t, file, anonRules(5, "")) // rewritten, same content
	assert.False(t, app.poll(srv.Live()))

	writeRules(t, file, anonRules(6, ""))
	assert.True(t, app.poll(srv.Live()))
	assert.Equal(t, gen+1, srv.Live().Generation())
	assert.False(t, app.poll(srv.Live()))

	writeRules(t, file, "rules: [{name: x}]\n")
	assert.True(t, app.poll(srv.Live()))
	assert.False(t, app.poll(srv.Live()))
	assert.False(t, app.poll(srv.Live()))
	assert.Equal(t, 1, logs.count("rules reload rejected"), "logged once per content")
	assert.Equal(t, gen+1, srv.Live().Generation())

	require.NoError(t, os.Remove(file))
	assert.True(t, app.poll(srv.Live()))
	assert.True(t, app.poll(srv.Live()), "a missing file is checked again at every interval")
	assert.Equal(t, 1, logs.count("rules reload failed"), "but logged once")

	writeRules(t, file, anonRules(6, ""))
	assert.True(t, app.poll(srv.Live()), "back to the content serving, after an invalid one: reloaded, no change")
	assert.Contains(t, logs.String(), `msg="rules reloaded: no change"`)
	writeRules(t, file, anonRules(7, ""))
	assert.True(t, app.poll(srv.Live()))
	assert.Equal(t, gen+3, srv.Live().Generation())
	r, _ := srv.Live().Current().Rule("anon")
	assert.Equal(t, int64(7), r.Limits[0].Requests)
}

// TestStartReloadsSignalAndWatch: SIGHUP reloads the file, and -watch
// reloads it when it changes, until stop.
func TestStartReloadsSignalAndWatch(t *testing.T) {
	app, srv, _, file, _ := reloadApp(t, anonRules(5, ""), Config{Watch: MinWatch})
	type attempt struct {
		trigger string
		err     error
	}
	got := make(chan attempt, 16)
	app.reload.notify = func(trigger string, _ rules.Change, err error) { got <- attempt{trigger, err} }
	stop := app.StartReloads(srv.Live())
	defer stop()
	wait := func() attempt {
		t.Helper()
		select {
		case a := <-got:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no reload")
		}
		return attempt{}
	}

	writeRules(t, file, anonRules(6, ""))
	a := wait()
	assert.Equal(t, TriggerWatch, a.trigger)
	require.NoError(t, a.err)
	limit := func() int64 { r, _ := srv.Live().Current().Rule("anon"); return r.Limits[0].Requests }
	assert.Equal(t, int64(6), limit())

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	a = wait()
	assert.Equal(t, TriggerSIGHUP, a.trigger, "SIGHUP reloads even an unchanged file")
	require.NoError(t, a.err)

	stop()
	stop() // idempotent
}

// TestReloadRaceThroughHTTP: requests through the nethttp example while
// the rules file is rewritten and reloaded 1,000 times, alternating two
// limits for one rule: every response is a 200 decided wholly by one of
// the two rules (its X-RateLimit-Limit is one of the two, and its
// Remaining is that limit's count, never the other's), none degraded.
func TestReloadRaceThroughHTTP(t *testing.T) {
	const limA, limB = 1_000_000, 3_000_000
	app, srv, h, file, _ := reloadApp(t, anonRules(limA, ""), Config{})
	const reloads, maxRequests = 1000, 900_000
	var done atomic.Bool
	var requests atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client{t: t, h: h, ip: fmt.Sprintf("198.51.100.%d", 10+w)}
			for !done.Load() {
				resp := c.do("GET", "/x")
				limit, _ := strconv.ParseInt(resp.Header().Get("X-RateLimit-Limit"), 10, 64)
				rem, err := strconv.ParseInt(resp.Header().Get("X-RateLimit-Remaining"), 10, 64)
				if resp.Code != http.StatusOK || err != nil || resp.Header().Get(DegradedHeader) != "" ||
					limit != limA && limit != limB || rem >= limit || rem < limit-maxRequests {
					errs <- fmt.Sprintf("code %d, headers %v", resp.Code, resp.Header())
					return
				}
				requests.Add(1)
				runtime.Gosched() // leave the reloader CPU time on a small machine
			}
		}()
	}
	for i := 1; i <= reloads; i++ {
		lim := limA
		if i%2 == 1 {
			lim = limB
		}
		writeRules(t, file, anonRules(lim, ""))
		_, err := app.ReloadRules(srv.Live())
		require.NoError(t, err)
		for n := requests.Load(); requests.Load() == n && len(errs) == 0; {
			runtime.Gosched()
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("%d requests across %d reloads", requests.Load(), reloads)
	assert.GreaterOrEqual(t, requests.Load(), int64(reloads))
	assert.Less(t, requests.Load(), int64(maxRequests), "the Remaining bound above holds")
}
