package serve_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

// TestFormRuleHandsIdentity: a rule keyed by a form field (the login
// rule, key: form:username) hands the username it charged to the handler
// (nethttp.Identity), as the examples' login handlers require; a rule
// keyed by another WithKey function (key: user) hands none, so that its
// requests pay nothing for the hand-over.
func TestFormRuleHandsIdentity(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	set, err := rules.Parse([]byte(file))
	require.NoError(t, err)
	reply := func(w http.ResponseWriter, r *http.Request) {
		id, ok := nethttp.Identity(r)
		if !ok {
			id = "none"
		}
		_, _ = w.Write([]byte("identity:" + id))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", reply)
	mux.HandleFunc("GET /v1/items", reply)
	_, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t)}, set, mux)
	require.NoError(t, err)
	do := func(r *http.Request) string {
		r.RemoteAddr = "203.0.113.7:4000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		return w.Body.String()
	}
	r := httptest.NewRequest("POST", "/login", strings.NewReader(loginForm("alice", "x")))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	assert.Equal(t, "identity:alice", do(r), "the login rule's form key")
	r = httptest.NewRequest("GET", "/v1/items", nil)
	r.Header.Set("X-User", "bob")
	assert.Equal(t, "identity:none", do(r), "the api rule's user key: no hand-over")
}
