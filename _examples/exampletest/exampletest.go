// Package exampletest checks the example servers under _examples from
// outside, through their http.Handler, for their tests: each framework's
// program wires the same API and rules, so one check serves them all. It
// is test support, imported only by _test.go files.
package exampletest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/core"
)

// RulesAndMetrics builds an example's API with newHandler on an App
// serving the default rules (rules/default.yaml) on a manual clock, and
// checks that the rules limit it (an anonymous GET anywhere is
// anonymous-get's, 50 a minute per IP, with its X-RateLimit headers) and
// that [exampleapp.MetricsPath] is never limited: 60 scrapes spend
// nothing of the scraper's quota, and the scrape counts the decision.
func RulesAndMetrics(t *testing.T, newHandler func(*exampleapp.App) (http.Handler, error)) {
	t.Helper()
	app, err := exampleapp.New(exampleapp.Config{}, exampleapp.WithClock(core.NewManualClock(time.Unix(1_700_000_000, 0))))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	h, err := newHandler(app)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}
	for i := range 60 {
		if w := get(exampleapp.MetricsPath); w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Limit") != "" {
			t.Fatalf("scrape %d: %d, headers %v: want 200, not limited", i+1, w.Code, w.Header())
		}
	}
	w := get("/docs")
	if got := [3]string{w.Result().Status, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining")}; got != [3]string{"200 OK", "50", "49"} {
		t.Errorf("GET /docs after 60 scrapes: status, limit, remaining %q; want 200 OK, 50, 49 (anonymous-get, the scrapes spent nothing)", got)
	}
	const counted = `limitkit_decisions_total{outcome="allowed",policy="anonymous-get"} 1`
	if body := get(exampleapp.MetricsPath).Body.String(); !strings.Contains(body, counted) {
		t.Errorf("/metrics has no %s:\n%s", counted, body)
	}
}
