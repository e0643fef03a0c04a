package serve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

const calendarRules = `
rules:
  - name: monthly
    route: /v1/*
    identity: authenticated
    key: user
    limits: ["5 per calendar month"]
    timezone: Europe/Berlin
`

// TestCalendarMonthThroughHTTP (issue 36): a "5 per calendar month" rule
// with timezone: Europe/Berlin, served through net/http at a manual
// clock, admits 5 requests and denies the sixth with Retry-After and
// X-RateLimit-Reset (epoch seconds, and delta seconds under
// WithResetDelta) at the next first of the month, midnight in Berlin; the
// month after admits again. Walked from November 29 (a 30-day month) and
// from February 28 2028 (a leap February) and December 31 (the year end).
func TestCalendarMonthThroughHTTP(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	set, err := rules.Parse([]byte(calendarRules))
	require.NoError(t, err)
	r, _ := set.Rule("monthly")
	assert.Equal(t, core.FixedWindow, r.Algorithm, "calendar limits are fixed windows")
	for _, c := range []struct{ at, next time.Time }{
		{time.Date(2026, 11, 29, 5, 17, 3, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, berlin)},
		{time.Date(2028, 2, 28, 23, 30, 0, 0, berlin), time.Date(2028, 3, 1, 0, 0, 0, 0, berlin)},
		{time.Date(2026, 12, 31, 23, 59, 58, 0, berlin), time.Date(2027, 1, 1, 0, 0, 0, 0, berlin)},
	} {
		for _, delta := range []bool{false, true} {
			store := memstore.MustNew()
			clock := core.NewManualClock(c.at)
			cfg := serve.Config{Store: store, Identity: identity(t), LimiterOptions: []core.Option{core.WithClock(clock)}}
			if delta {
				cfg.Options = []httplimit.Option{httplimit.WithResetDelta()}
			}
			_, h, err := serve.NewNetHTTP(cfg, set, routes())
			require.NoError(t, err)
			get := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest("GET", "/v1/items", nil)
				req.Header.Set("X-User", "alice")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w
			}
			wait := int64(c.next.Sub(clock.Now()).Seconds())
			if c.at.Equal(time.Date(2026, 11, 29, 5, 17, 3, 0, time.UTC)) {
				// docs/calendar.md's figures
				require.Equal(t, int64(150177), wait)
				require.Equal(t, int64(1796079600), c.next.Unix())
			}
			reset := strconv.FormatInt(c.next.Unix(), 10)
			if delta {
				reset = strconv.FormatInt(wait, 10)
			}
			for i := range 5 {
				w := get()
				require.Equal(t, http.StatusOK, w.Code, "request %d", i+1)
				assert.Equal(t, reset, w.Header().Get("X-RateLimit-Reset"))
				assert.Equal(t, strconv.Itoa(4-i), w.Header().Get("X-RateLimit-Remaining"))
			}
			w := get()
			require.Equal(t, http.StatusTooManyRequests, w.Code, "the sixth")
			assert.Equal(t, strconv.FormatInt(wait, 10), w.Header().Get("Retry-After"))
			assert.Equal(t, reset, w.Header().Get("X-RateLimit-Reset"))
			assert.Equal(t, "5", w.Header().Get("X-RateLimit-Limit"))

			clock.Advance(c.next.Add(-time.Microsecond).Sub(clock.Now()))
			assert.Equal(t, http.StatusTooManyRequests, get().Code, "a µs before the month's end")
			clock.Advance(c.next.Sub(clock.Now()))
			assert.Equal(t, http.StatusOK, get().Code, "the next month")
			store.Close()
		}
	}
}

// usageHandler is the GET /usage recipe of docs/calendar.md: the
// caller's counters of one rule, as JSON, consuming nothing.
func usageHandler(srv *serve.Server[http.Handler], rule string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get("X-User") // your authentication's user id
		if user == "" {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		u, err := srv.Usage(r.Context(), rule, user)
		if err != nil {
			http.Error(w, "usage unavailable", http.StatusServiceUnavailable)
			return
		}
		p := u.Policies[0]
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"used": p.Used, "remaining": p.Remaining, "limit": p.Limit,
			"resets_at": time.Unix(p.Reset, 0).UTC().Format(time.RFC3339),
		})
	})
}

// TestCalendarUsageRecipe (issue 36): the GET /usage recipe reports used,
// remaining and the next boundary for a calendar month, and reading it
// consumes nothing.
func TestCalendarUsageRecipe(t *testing.T) {
	set, err := rules.Parse([]byte(calendarRules))
	require.NoError(t, err)
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC))
	srv, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t), LimiterOptions: []core.Option{core.WithClock(clock)}}, set, routes())
	require.NoError(t, err)
	usage := usageHandler(srv, "monthly")
	for range 3 {
		req := httptest.NewRequest("GET", "/v1/items", nil)
		req.Header.Set("X-User", "bob")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	for range 2 {
		req := httptest.NewRequest("GET", "/usage", nil)
		req.Header.Set("X-User", "bob")
		w := httptest.NewRecorder()
		usage.ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code)
		var got map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
		// April 1, midnight in Berlin (summer time): 22:00 UTC on March 31
		assert.Equal(t, map[string]any{"used": 3.0, "remaining": 2.0, "limit": 5.0, "resets_at": "2026-03-31T22:00:00Z"}, got)
	}
	u, err := srv.Usage(context.Background(), "monthly", "bob")
	require.NoError(t, err)
	assert.Equal(t, []string{"5 per calendar month in Europe/Berlin"}, u.Policies[0].Limits)
}

// TestCalendarRuleReloadKeepsCounters (issue 36): reloading a calendar
// rule whose limits did not change (its zone loaded again, a new
// *time.Location; its fail mode changed) keeps its counters: the limits
// compare by zone name, not by pointer.
func TestCalendarRuleReloadKeepsCounters(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC))
	set, err := rules.Parse([]byte(calendarRules))
	require.NoError(t, err)
	srv, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t), LimiterOptions: []core.Option{core.WithClock(clock)}}, set, routes())
	require.NoError(t, err)
	get := func() int {
		req := httptest.NewRequest("GET", "/v1/items", nil)
		req.Header.Set("X-User", "carol")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	for range 5 {
		require.Equal(t, http.StatusOK, get())
	}
	// the same limits, a fail mode changed: the policy is not identical,
	// its state means the same
	again, err := rules.Parse([]byte(calendarRules + "    fail_mode: closed\n"))
	require.NoError(t, err)
	_, err = srv.Live().Swap(again)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, get(), "the month's count survives the reload")
}
