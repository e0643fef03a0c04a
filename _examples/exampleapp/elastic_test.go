package exampleapp

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestElasticRulesFile: an elastic rule of a rules file works in the
// examples (its capacity limit in the app's store, the load counted by
// the middleware), and keeps its state across a reload of the same file;
// raising the capacity in the file applies at the reload.
func TestElasticRulesFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yaml")
	src := `
rules:
  - name: tenant
    route: /*
    key: "header:X-Tenant"
    algorithm: fixed_window
    limits: ["2 per 1h"]
    elastic: {ceiling: 300%, capacity: "3 per 1h", max_in_flight: 10}
`
	require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
	clock := core.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	app, err := New(Config{RulesFile: file}, WithClock(clock))
	require.NoError(t, err)
	defer app.Close()
	srv, h, err := app.HTTPHandler()
	require.NoError(t, err)
	acme := client{t: t, h: h, ip: "203.0.113.5", hdr: map[string]string{"X-Tenant": "acme"}}
	n, denied := acme.sendUntilDenied("GET", "/x", 10)
	assert.Equal(t, 5, n, "2 within the limit, 3 from the capacity limit")
	require.NotNil(t, denied)
	assert.Equal(t, "2", denied.Header().Get("X-Ratelimit-Limit"), "the nominal limit is advertised")
	assert.Zero(t, app.InFlight.Load())

	_, err = app.ReloadRules(srv.Live())
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, acme.do("GET", "/x").Code, "state kept across the reload")

	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(src, `"3 per 1h"`, `"9 per 1h"`, 1)), 0o600))
	_, err = app.ReloadRules(srv.Live())
	require.NoError(t, err)
	n, _ = acme.sendUntilDenied("GET", "/x", 10)
	assert.Equal(t, 1, n, "a new capacity limit of 9; the key's ceiling (6) leaves 1")
}
