package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

// adminApp is the test file's rules on store behind serve.NewNetHTTP,
// with the admin handler mounted at serve.AdminPath (token "T") outside
// the rules.
func adminApp(t *testing.T, store core.Store, clock core.Clock) (*serve.Server[http.Handler], http.Handler) {
	t.Helper()
	set, err := rules.Parse([]byte(file))
	require.NoError(t, err)
	srv, limited, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: identity(t), LimiterOptions: []core.Option{core.WithClock(clock)}}, set, routes())
	require.NoError(t, err)
	admin, err := srv.AdminHandler(serve.AdminConfig{Authorize: serve.BearerToken("T")})
	require.NoError(t, err)
	return srv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, serve.AdminPath) {
			admin.ServeHTTP(w, r)
			return
		}
		limited.ServeHTTP(w, r)
	})
}

func adminDo(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// adminStores are the stores the admin surface must work on: the
// embedded one, Redis, and the fleet tier in front of Redis.
func adminStores(t *testing.T) map[string]func(t *testing.T) core.Store {
	stores := map[string]func(t *testing.T) core.Store{
		"memstore": func(t *testing.T) core.Store {
			s := memstore.MustNew()
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	{ // StartNode skips without redis-server, or fails under LIMITKIT_REQUIRE_REDIS=1
		redis := func(t *testing.T) redisstore.Store {
			rs, err := redisstore.New(redistest.StartNode(t).NewClient(t), redisstore.WithClientTime())
			require.NoError(t, err)
			return rs
		}
		stores["redis"] = func(t *testing.T) core.Store { return redis(t) }
		stores["fleet"] = func(t *testing.T) core.Store {
			f, err := fleet.New(redis(t))
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
			return f
		}
	}
	return stores
}

// TestAdminUnblocksLogin (issue 37): 12 failed logins for one username
// end in 429; the admin GET reports nothing remaining for that username,
// with the limit, its window and when it resets; the DELETE answers 204
// and the next failed login is a 401 again; another username and the IP
// check are untouched. On every store, the fleet tier included.
func TestAdminUnblocksLogin(t *testing.T) {
	for name, newStore := range adminStores(t) {
		t.Run(name, func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			clock := core.NewManualClock(start)
			_, h := adminApp(t, newStore(t), clock)
			var codes []int
			for range 4 {
				codes = append(codes, send(h, "POST", "/login", loginForm("alice", "x")))
			}
			assert.Equal(t, []int{401, 401, 401, 429}, codes, "3 per 15m")

			w := adminDo(h, "GET", serve.AdminPath+"login/alice", "T")
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			var u serve.RuleUsage
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &u))
			require.Len(t, u.Policies, 1, "login-ip keys by IP: not alice's")
			p := u.Policies[0]
			assert.Equal(t, serve.PolicyUsage{Policy: "login", Kind: "rule", Limits: []string{"3 per 15m"}, Limit: 3, Window: 900,
				Used: 3, Remaining: 0, Reset: start.Add(15 * time.Minute).Unix(), RetryAfter: p.RetryAfter,
				PerLimit: []serve.LimitUsage{{Limit: 3, Window: 900, Used: 3, Remaining: 0, Reset: start.Add(15 * time.Minute).Unix(), RetryAfter: 300}}}, p)
			assert.Equal(t, (5 * time.Minute).Seconds(), p.RetryAfter, "GCRA 3 per 15m: one guess back every 5 minutes")

			w = adminDo(h, "GET", serve.AdminPath+"login-ip/203.0.113.7", "T")
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &u))
			assert.Equal(t, []int64{3, 2}, []int64{u.Policies[0].Used, u.Policies[0].Remaining}, "the IP check by its own name: 3 failures of 5")

			w = adminDo(h, "DELETE", serve.AdminPath+"login/alice", "T")
			assert.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
			assert.Equal(t, 401, send(h, "POST", "/login", loginForm("alice", "x")), "alice unblocked")
			w = adminDo(h, "GET", serve.AdminPath+"login/alice", "T")
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &u))
			assert.Equal(t, []int64{1, 2}, []int64{u.Policies[0].Used, u.Policies[0].Remaining}, "one failure since the reset")
			w = adminDo(h, "GET", serve.AdminPath+"login-ip/203.0.113.7", "T")
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &u))
			assert.Equal(t, int64(4), u.Policies[0].Used, "resetting alice leaves the IP's count")
		})
	}
}

// TestAdminResetsEveryTier: a rule with tiers and overrides keeps one
// counter per policy; the DELETE forgets the identity's in each, and the
// GET lists the tiers, or only the override of an identity that has one.
func TestAdminResetsEveryTier(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	_, h := adminApp(t, store, clock)
	assert.Equal(t, 2, quota(h, "X-User", "a"))
	assert.Equal(t, 4, quota(h, "X-User", "a", "X-Plan", "pro"))
	assert.Equal(t, 6, quota(h, "X-User", "vip"))

	w := adminDo(h, "GET", serve.AdminPath+"api/a", "T")
	var u serve.RuleUsage
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &u))
	var got []string
	for _, p := range u.Policies {
		got = append(got, p.Policy+" "+p.Kind+" "+p.Tier)
		assert.Zero(t, p.Remaining, p.Policy)
	}
	assert.Equal(t, []string{"api rule ", "api/pro tier pro"}, got)
	w = adminDo(h, "GET", serve.AdminPath+"api/vip", "T")
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &u))
	require.Len(t, u.Policies, 1)
	assert.Equal(t, "override", u.Policies[0].Kind)
	assert.Equal(t, int64(6), u.Policies[0].Used)

	for _, id := range []string{"a", "vip"} {
		assert.Equal(t, http.StatusNoContent, adminDo(h, "DELETE", serve.AdminPath+"api/"+id, "T").Code)
	}
	assert.Equal(t, 2, quota(h, "X-User", "a"), "the default tier reset")
	assert.Equal(t, 4, quota(h, "X-User", "a", "X-Plan", "pro"), "the pro tier reset")
	assert.Equal(t, 6, quota(h, "X-User", "vip"), "the override reset")
}

// TestAdminRefuses: no token or a wrong one is 401 (before the rule is
// looked up), an unknown rule 404, an identity that is empty, too long,
// holds a control character or is no IP for an IP rule 400, another
// method 405; a nil Authorize or a bad prefix fails at construction.
func TestAdminRefuses(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	srv, h := adminApp(t, store, clock)
	for _, c := range []struct {
		method, path, token string
		code                int
	}{
		{"GET", "login/alice", "", 401},
		{"DELETE", "login/alice", "", 401},
		{"GET", "login/alice", "t", 401},
		{"GET", "login/alice", "TT", 401},
		{"GET", "nope/alice", "", 401},
		{"GET", "nope/alice", "T", 404},
		{"DELETE", "nope/alice", "T", 404},
		{"GET", "login/", "T", 400},
		{"GET", "login", "T", 400},
		{"GET", "login/a/b", "T", 400},
		{"GET", "login/a%01b", "T", 400},
		{"GET", "login/" + strings.Repeat("x", serve.MaxIdentityLen+1), "T", 400},
		{"GET", "login-ip/alice", "T", 400},
		{"POST", "login/alice", "T", 405},
		{"GET", "login/" + strings.Repeat("x", serve.MaxIdentityLen), "T", 200},
		{"GET", "login/a%2Fb", "T", 200},
	} {
		w := adminDo(h, c.method, serve.AdminPath+c.path, c.token)
		assert.Equal(t, c.code, w.Code, "%s %s token %q: %s", c.method, c.path, c.token, w.Body.String())
		if c.code == 401 {
			assert.NotEmpty(t, w.Header().Get("WWW-Authenticate"))
		}
		if c.code != 200 {
			assert.NotContains(t, w.Body.String(), "xxxxxxxx", "no error body echoes the identity")
		}
	}
	r := httptest.NewRequest("GET", serve.AdminPath+"login/alice", nil)
	r.Header.Set("Authorization", "bearer T")
	assert.True(t, serve.BearerToken("T")(r), "the scheme is case-insensitive")
	assert.False(t, serve.BearerToken("")(r), "an empty token admits nobody")
	r.Header.Set("Authorization", "Bearer ")
	assert.False(t, serve.BearerToken("")(r), "an empty token admits nobody, not even an empty bearer")
	r.Header.Set("Authorization", "Basic T")
	assert.False(t, serve.BearerToken("T")(r))
	r.Header.Set("Authorization", "Bearer T")
	assert.True(t, serve.BearerToken("T\n")(r), "a configured token's trailing newline (a file, an env var) is not part of it")
	r.Header.Set("Authorization", "Bearer ")
	assert.False(t, serve.BearerToken(" \n")(r), "a token of white space admits nobody")

	_, err := srv.AdminHandler(serve.AdminConfig{})
	assert.ErrorContains(t, err, "BearerToken")
	_, err = srv.AdminHandler(serve.AdminConfig{Authorize: serve.BearerToken("T"), Prefix: "/admin"})
	assert.ErrorContains(t, err, "must start and end with /")
}

// TestAdminGoAPI: Usage and ResetIdentity are the handler's verbs for
// code; an identity is the value the key function reads (an API key as
// the client sends it, hashed as the key function hashes it; an IPv6
// address under its /64).
func TestAdminGoAPI(t *testing.T) {
	const keyed = `
rules:
  - name: bykey
    route: /k
    key: api_key
    limits: ["1 per 1m"]
  - name: byip
    route: /i
    limits: ["1 per 1m"]
`
	store := memstore.MustNew()
	defer store.Close()
	set, err := rules.Parse([]byte(keyed))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/k", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/i", func(http.ResponseWriter, *http.Request) {})
	srv, h, err := serve.NewNetHTTP(serve.Config{Store: store}, set, mux)
	require.NoError(t, err)
	ctx := context.Background()

	assert.Equal(t, 200, send(h, "GET", "/k", "", "X-API-Key", "k_secret"))
	assert.Equal(t, 429, send(h, "GET", "/k", "", "X-API-Key", "k_secret"))
	u, err := srv.Usage(ctx, "bykey", "k_secret")
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.Policies[0].Used, "the API key as sent")
	require.NoError(t, srv.ResetIdentity(ctx, "bykey", "k_secret"))
	assert.Equal(t, 200, send(h, "GET", "/k", "", "X-API-Key", "k_secret"))

	r := httptest.NewRequest("GET", "/i", nil)
	r.RemoteAddr = "[2001:db8::1]:4000"
	h.ServeHTTP(httptest.NewRecorder(), r)
	u, err = srv.Usage(ctx, "byip", "2001:db8::2")
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.Policies[0].Used, "the same /64")
	require.NoError(t, srv.ResetIdentity(ctx, "byip", "2001:db8::ffff"))
	u, err = srv.Usage(ctx, "byip", "2001:db8::1")
	require.NoError(t, err)
	assert.Zero(t, u.Policies[0].Used)

	assert.ErrorIs(t, srv.ResetIdentity(ctx, "nope", "x"), serve.ErrUnknownRule)
	_, err = srv.Usage(ctx, "byip", "not-an-ip")
	assert.ErrorIs(t, err, serve.ErrBadIdentity)
}

// TestAdminUserRuleAPIKeyPrincipal: on a rule keyed by user whose
// principal is an API key for some callers (the Identity tags them
// "key", its Override maps "key:<API key>"), the identity
// "key:<API key>" reads and resets that caller's counters, and its
// override's; a bare identity is still the user id. The admin used to
// build "user:key:<API key>" and answer 204 having reset nothing.
func TestAdminUserRuleAPIKeyPrincipal(t *testing.T) {
	const plans = `
rules:
  - name: plans
    route: /v1/*
    identity: authenticated
    key: user
    limits: ["2 per 1m"]
    overrides: {"key:k_big": ["3 per 1m"]}
`
	principal := func(r keyfuncs.Request) (string, error) {
		if k := r.Header("X-API-Key"); k != "" {
			h, err := serve.APIKeyOf(serve.Identity{}, k)
			return keyfuncs.Join("key", h), err
		}
		if u := r.Header("X-User"); u != "" {
			return keyfuncs.Join("user", keyfuncs.Bound(u)), nil
		}
		return "", nil
	}
	id := serve.Identity{User: principal, Override: func(r *rules.Rule, client string) (string, error) {
		kind, v, _ := strings.Cut(client, ":")
		switch kind {
		case "user":
			return keyfuncs.Join("user", keyfuncs.Bound(v)), nil
		case "key":
			h, err := serve.APIKeyOf(serve.Identity{}, v)
			return keyfuncs.Join("key", h), err
		}
		return "", errors.New("unknown client kind")
	}}
	store := memstore.MustNew()
	defer store.Close()
	set, err := rules.Parse([]byte(plans))
	require.NoError(t, err)
	srv, h, err := serve.NewNetHTTP(serve.Config{Store: store, Identity: id}, set, routes())
	require.NoError(t, err)
	ctx := context.Background()

	assert.Equal(t, 3, quota(h, "X-API-Key", "k_big"), "the override")
	assert.Equal(t, 2, quota(h, "X-User", "alice"))
	u, err := srv.Usage(ctx, "plans", "key:k_big")
	require.NoError(t, err)
	require.Len(t, u.Policies, 1)
	assert.Equal(t, []any{"override", int64(3), int64(0)}, []any{u.Policies[0].Kind, u.Policies[0].Used, u.Policies[0].Remaining}, "the API key's override")
	u, err = srv.Usage(ctx, "plans", "alice")
	require.NoError(t, err)
	assert.Equal(t, int64(2), u.Policies[0].Used, "a bare identity is the user id")

	require.NoError(t, srv.ResetIdentity(ctx, "plans", "key:k_big"))
	assert.Equal(t, 3, quota(h, "X-API-Key", "k_big"), "the API key's counters forgotten")
	assert.Equal(t, 0, quota(h, "X-User", "alice"), "alice's untouched")
	require.NoError(t, srv.ResetIdentity(ctx, "plans", "user:alice"))
	assert.Equal(t, 2, quota(h, "X-User", "alice"), "user:<id> names the user explicitly")
}

// TestAdminJSONFields: the GET's body is exactly the documented JSON
// (docs/operations.md, The admin surface): its field names are the contract operators' scripts
// read, so a renamed field fails here, not in their dashboards.
func TestAdminJSONFields(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	store := memstore.MustNew()
	defer store.Close()
	_, h := adminApp(t, store, core.NewManualClock(start))
	for range 3 {
		send(h, "POST", "/login", loginForm("alice", "x"))
	}
	w := adminDo(h, "GET", serve.AdminPath+"login/alice", "T")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	assert.JSONEq(t, `{"rule":"login","identity":"alice","policies":[{"policy":"login","kind":"rule","limits":["3 per 15m"],
		"limit":3,"window_seconds":900,"used":3,"remaining":0,"reset":1700000900,"retry_after_seconds":300,
		"per_limit":[{"limit":3,"window_seconds":900,"used":3,"remaining":0,"reset":1700000900,"retry_after_seconds":300}]}]}`, w.Body.String())
	w = adminDo(h, "GET", serve.AdminPath+"api/a", "T")
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"rule":"api","identity":"a","policies":[
		{"policy":"api","kind":"rule","limits":["2 per 1m"],"limit":2,"window_seconds":60,"used":0,"remaining":2,"reset":1700000000,"retry_after_seconds":0,
		 "per_limit":[{"limit":2,"window_seconds":60,"used":0,"remaining":2,"reset":1700000000,"retry_after_seconds":0}]},
		{"policy":"api/pro","kind":"tier","tier":"pro","limits":["4 per 1m"],"limit":4,"window_seconds":60,"used":0,"remaining":4,"reset":1700000000,"retry_after_seconds":0,
		 "per_limit":[{"limit":4,"window_seconds":60,"used":0,"remaining":4,"reset":1700000000,"retry_after_seconds":0}]}]}`, w.Body.String())
}

// TestAdminFleetLeases: through the fleet tier in write-back mode the
// GET counts the units this server holds leased (charged at Redis, not
// yet spent) as remaining, not as used: after 30 requests of 100 per
// minute it reads 30 used and 70 remaining, and 70 more are admitted
// (it read 35 and 65).
func TestAdminFleetLeases(t *testing.T) {
	const big = `
rules:
  - name: big
    route: /v1/*
    identity: authenticated
    key: user
    limits: ["100 per 1m"]
`
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	rs, err := redisstore.New(redistest.StartNode(t).NewClient(t), redisstore.WithClientTime())
	require.NoError(t, err)
	f, err := fleet.New(rs, fleet.WithSync(time.Second), fleet.WithClock(clock))
	require.NoError(t, err)
	defer f.Close()
	set, err := rules.Parse([]byte(big))
	require.NoError(t, err)
	srv, h, err := serve.NewNetHTTP(serve.Config{Store: f, Identity: identity(t), LimiterOptions: []core.Option{core.WithClock(clock)}}, set, routes())
	require.NoError(t, err)
	for range 30 {
		require.Equal(t, http.StatusOK, send(h, "GET", "/v1/items", "", "X-User", "alice"))
	}
	u, err := srv.Usage(context.Background(), "big", "alice")
	require.NoError(t, err)
	assert.Equal(t, []int64{30, 70}, []int64{u.Policies[0].Used, u.Policies[0].Remaining}, "leased units are remaining")
	assert.Equal(t, 70, quota(h, "X-User", "alice"))
}
