// Package exampletest checks the example servers under _examples from
// outside, through their http.Handler, for their tests: each framework's
// program wires the same API and rules, so one check serves them all. It
// is test support, imported only by _test.go files.
package exampletest

import (
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/rules/serve"
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

// LoginSplit is issue 40's login split through an example's real
// handler, on the default rules (login: 10 failures per 15 minutes per
// username, keyed by the form field, falling back to the IP): one
// username guessed from 20 IPs, 3 wrong passwords each, in every
// encoding a framework's form parsing might accept. At most 10 guesses
// reach the login handler (a 401 from it) in each encoding: the ones the
// username's count admits when the rule reads the username, none when it
// cannot and the request is refused with the stated status (400 bad
// escaping, ';', conflicting values or the username in the query string;
// 413 a body over 64 KiB; 415 another content type), never keyed by
// the IP.
func LoginSplit(t *testing.T, newHandler func(*exampleapp.App) (http.Handler, error)) {
	t.Helper()
	pad := strings.Repeat("x", 64<<10)
	const form = "application/x-www-form-urlencoded"
	multipartForm := func(fields ...string) (string, string) {
		var b strings.Builder
		w := multipart.NewWriter(&b)
		for i := 0; i+1 < len(fields); i += 2 {
			_ = w.WriteField(fields[i], fields[i+1])
		}
		_ = w.Close()
		return b.String(), w.FormDataContentType()
	}
	for _, e := range []struct {
		name   string
		req    func(i int) (target, contentType, body string)
		status int // the refusal's status, 0 when the username is read
	}{
		{"urlencoded", func(i int) (string, string, string) {
			return "/login", form, fmt.Sprintf("username=victim&password=guess%d", i)
		}, 0},
		{"multipart", func(i int) (string, string, string) {
			b, ct := multipartForm("username", "victim", "password", fmt.Sprintf("guess%d", i))
			return "/login", ct, b
		}, 0},
		{"query", func(i int) (string, string, string) {
			return "/login?username=victim", form, fmt.Sprintf("password=guess%d", i)
		}, 400},
		{"query and decoy body", func(i int) (string, string, string) {
			return "/login?username=victim", form, fmt.Sprintf("username=decoy%d&password=guess%d", i, i)
		}, 400},
		{"badly escaped", func(i int) (string, string, string) {
			return "/login", form, fmt.Sprintf("username=victim&password=guess%d&x=%%zz", i)
		}, 400},
		{"semicolon", func(i int) (string, string, string) {
			return "/login", form, fmt.Sprintf("username=victim;password=guess%d", i)
		}, 400},
		{"decoy first", func(i int) (string, string, string) {
			return "/login", form, fmt.Sprintf("username=decoy%d&username=victim&password=guess%d", i, i)
		}, 400},
		{"over the bound", func(i int) (string, string, string) {
			return "/login", form, fmt.Sprintf("username=victim&password=guess%d&pad=%s", i, pad)
		}, 413},
		{"json", func(i int) (string, string, string) {
			return "/login", "application/json", fmt.Sprintf(`{"username":"victim","password":"guess%d"}`, i)
		}, 415},
	} {
		t.Run(e.name, func(t *testing.T) {
			app, err := exampleapp.New(exampleapp.Config{}, exampleapp.WithClock(core.NewManualClock(time.Unix(1_700_000_000, 0))))
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close()
			h, err := newHandler(app)
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for ip := range 20 {
				for guess := range 3 {
					target, ct, body := e.req(3*ip + guess)
					r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
					r.Header.Set("Content-Type", ct)
					r.RemoteAddr = fmt.Sprintf("192.0.2.%d:4000", ip+1)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					switch {
					case w.Code == http.StatusUnauthorized && strings.Contains(w.Body.String(), "invalid username or password"):
						checked++ // the login handler checked a password
					case e.status != 0:
						if w.Code != e.status || !strings.Contains(w.Body.String(), fmt.Sprintf(`"status":%d`, e.status)) {
							t.Fatalf("guess %d from IP %d: %d %s; want %d and its problem", guess+1, ip+1, w.Code, w.Body, e.status)
						}
					case w.Code != http.StatusTooManyRequests:
						t.Fatalf("guess %d from IP %d: %d %s; want 401 or 429", guess+1, ip+1, w.Code, w.Body)
					}
				}
			}
			want := 0
			if e.status == 0 {
				want = 10
			}
			if checked != want {
				t.Errorf("%d of 60 guesses from 20 IPs reached the password check; want %d (the username's limit is 10)", checked, want)
			}
		})
	}
	// The handler logs in the username the rule counted (the form field
	// trimmed), not the field as its framework parses it again.
	t.Run("identity", func(t *testing.T) {
		app, err := exampleapp.New(exampleapp.Config{}, exampleapp.WithClock(core.NewManualClock(time.Unix(1_700_000_000, 0))))
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		h, err := newHandler(app)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ body, status, reply string }{
			{"username=+alice%09&password=" + exampleapp.DemoPassword, "200", `"user":"alice"`},
			{"password=" + exampleapp.DemoPassword, "400", "no username"},
		} {
			r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(c.body))
			r.Header.Set("Content-Type", form)
			r.RemoteAddr = "192.0.2.1:4000"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if fmt.Sprint(w.Code) != c.status || !strings.Contains(w.Body.String(), c.reply) {
				t.Errorf("POST /login %s: %d %s; want %s with %s", c.body, w.Code, w.Body, c.status, c.reply)
			}
		}
	})
}

// AdminUnblocksLogin builds an example's API with newHandler on an App
// given -admin-token T (default rules, manual clock) and checks the
// operators' day (issue 37): 12 failed logins for one username end in
// 429; the admin GET of login/<username> reports nothing remaining of 10
// per 15 minutes; a request without the token, or with another, is 401
// whatever its method (another method with the token is 405);
// an unknown rule is 404; the DELETE answers 204 and the next failed
// login is a 401 again; the admin requests spent no quota.
func AdminUnblocksLogin(t *testing.T, newHandler func(*exampleapp.App) (http.Handler, error)) {
	t.Helper()
	app, err := exampleapp.New(exampleapp.Config{AdminToken: "T"}, exampleapp.WithClock(core.NewManualClock(time.Unix(1_700_000_000, 0))))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	h, err := newHandler(app)
	if err != nil {
		t.Fatal(err)
	}
	login := func(user string) int {
		r := httptest.NewRequest("POST", exampleapp.LoginPath, strings.NewReader(url.Values{"username": {user}, "password": {"wrong"}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	admin := func(method, path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, serve.AdminPath+path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Header().Get("X-RateLimit-Limit") != "" {
			t.Errorf("%s %s: limited by the rules (%v); the admin surface must not be", method, path, w.Header())
		}
		return w
	}
	var codes []int
	for range 12 {
		codes = append(codes, login("alice"))
	}
	if want := []int{401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 429, 429}; !equal(codes, want) {
		t.Fatalf("12 failed logins for alice: %v; want %v (10 per 15 minutes)", codes, want)
	}
	for _, c := range []struct {
		method, path, token string
		code                int
	}{
		{"GET", "login/alice", "", http.StatusUnauthorized},
		{"GET", "login/alice", "not-T", http.StatusUnauthorized},
		{"DELETE", "login/alice", "", http.StatusUnauthorized},
		// every method is refused without the token before the method is
		// looked at: the router does not answer 405 first
		{"POST", "login/alice", "", http.StatusUnauthorized},
		{"OPTIONS", "login/alice", "", http.StatusUnauthorized},
		{"PUT", "login/alice", "not-T", http.StatusUnauthorized},
		{"PUT", "login/alice", "T", http.StatusMethodNotAllowed},
		{"GET", "no-such-rule/alice", "T", http.StatusNotFound},
	} {
		if w := admin(c.method, c.path, c.token); w.Code != c.code {
			t.Errorf("%s %s with token %q: %d %s; want %d", c.method, c.path, c.token, w.Code, w.Body, c.code)
		}
	}
	if got := login("alice"); got != http.StatusTooManyRequests {
		t.Fatalf("refused admin requests must not unblock alice: %d", got)
	}
	w := admin("GET", "login/alice", "T")
	var u serve.RuleUsage
	if err := json.Unmarshal(w.Body.Bytes(), &u); w.Code != http.StatusOK || err != nil || len(u.Policies) != 1 {
		t.Fatalf("GET login/alice: %d %s (%v); want 200 and the login policy", w.Code, w.Body, err)
	}
	if p := u.Policies[0]; p.Policy != "login" || p.Limit != 10 || p.Window != 900 || p.Remaining != 0 || p.Used != 10 || p.Reset <= 1_700_000_000 {
		t.Errorf("GET login/alice: %+v; want login, 10 per 900 s, 10 used, 0 remaining, a reset ahead", p)
	}
	if w := admin("DELETE", "login/alice", "T"); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE login/alice: %d %s; want 204", w.Code, w.Body)
	}
	if got := login("alice"); got != http.StatusUnauthorized {
		t.Errorf("the failed login after the DELETE: %d; want 401 (unblocked)", got)
	}
}

// NoAdminWithoutToken checks that an example given no -admin-token
// serves nothing at serve.AdminPath: no usage, and no reset.
func NoAdminWithoutToken(t *testing.T, newHandler func(*exampleapp.App) (http.Handler, error)) {
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
	for _, m := range []string{"GET", "DELETE"} {
		r := httptest.NewRequest(m, serve.AdminPath+"login/alice", nil)
		r.Header.Set("Authorization", "Bearer T")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusNoContent || w.Code == http.StatusUnauthorized || strings.Contains(w.Body.String(), `"policies"`) {
			t.Errorf("%s %slogin/alice without -admin-token: %d %s; want no admin surface", m, serve.AdminPath, w.Code, w.Body)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
