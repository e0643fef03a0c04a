package exampleapp

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/internal/redistest"
)

// TestDeploySeriesOnTheExample (issue 37): the shipped dashboard and
// alerts (deploy/) name series a healthy deployment must export before
// its first incident. The example on Redis with -sync 100ms, after some
// traffic (anonymous GETs, failed logins, none of which fails), is
// scraped once: every limitkit_* name deploy/ uses is there, and no
// series has an empty policy label.
func TestDeploySeriesOnTheExample(t *testing.T) {
	srv := redistest.StartNode(t)
	app, err := New(Config{Redis: srv.Addr, Sync: 100 * time.Millisecond}, WithStoreTimeout(redistest.StoreTimeout))
	require.NoError(t, err)
	defer app.Close()
	_, h, err := app.HTTPHandler()
	require.NoError(t, err)
	do := func(method, path, body string) int {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 5 {
		require.Equal(t, http.StatusOK, do("GET", "/docs", ""))
		require.Equal(t, http.StatusUnauthorized, do("POST", LoginPath, url.Values{"username": {"alice"}, "password": {"x"}}.Encode()))
	}
	r := httptest.NewRequest("GET", MetricsPath, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code)
	scrape := w.Body.String()
	have := map[string]bool{}
	for _, line := range strings.Split(scrape, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		have[name] = true
		require.NotContains(t, line, `policy=""`, "a series without its policy")
	}
	files, err := filepath.Glob("../../deploy/*")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	nameRe := regexp.MustCompile(`limitkit_[a-z_]+`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, n := range nameRe.FindAllString(string(b), -1) {
			if !have[n] {
				t.Errorf("%s uses %s, which the example on Redis with -sync 100ms does not export before an incident", filepath.Base(f), n)
			}
		}
	}
}
