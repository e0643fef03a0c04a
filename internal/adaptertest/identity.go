package adaptertest

import (
	"fmt"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// ReplyIdentity is the request header asking the suite's routes to
// answer with the identity the adapter's Identity accessor gives the
// handler: "identity:<id>", or "identity:none" when it reports false.
const ReplyIdentity = "X-Reply-Identity"

func identityReply(id string, ok bool) string {
	if !ok {
		return "identity:none"
	}
	return "identity:" + id
}

// refusedBody is the problem body of a keyfuncs.Refusal.
func refusedBody(status int, detail string) string {
	return `{"type":"about:blank","title":"` + http.StatusText(status) + `","status":` + strconv.Itoa(status) + `,"detail":"` + detail + `"}`
}

// multipartForm is a multipart/form-data body of the fields (name, value
// pairs) and its content type.
func multipartForm(fields ...string) (body, contentType string) {
	var b strings.Builder
	w := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = w.WriteField(fields[i], fields[i+1])
	}
	_ = w.Close()
	return b.String(), w.FormDataContentType()
}

func init() {
	scenarios = append(scenarios, scenario{"FormFieldKeyEveryEncoding", formEveryEncoding})
}

// formEveryEncoding is the login split of issue 40: one username guessed
// from 20 IPs, 3 guesses each, in every encoding a handler might accept,
// against a username limit of 10 that falls back to the IP key (the
// rules' login rule). At most 10 guesses reach a handler reading the
// username, whether it reads it with the framework's own form parsing
// (net/http's PostFormValue, gin's PostForm, echo's and fiber's
// FormValue, which also read the query string) or with the adapter's
// Identity; what the key cannot read is refused with its status, never
// keyed by the IP.
func formEveryEncoding(t *testing.T, h Harness, env *Env) {
	user, err := keyfuncs.FormField("username")
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", formBodyMax)
	type enc struct {
		name   string
		req    func(i int) (target, contentType, body string)
		status int // the refusal's status, 0 when the username is read
	}
	urlenc := "application/x-www-form-urlencoded"
	encs := []enc{
		{"urlencoded", func(i int) (string, string, string) {
			return "/login", urlenc, fmt.Sprintf("username=victim&password=guess%d", i)
		}, 0},
		{"multipart", func(i int) (string, string, string) {
			b, ct := multipartForm("username", "victim", "password", fmt.Sprintf("guess%d", i))
			return "/login", ct, b
		}, 0},
		{"query", func(i int) (string, string, string) {
			return "/login?username=victim", urlenc, fmt.Sprintf("password=guess%d", i)
		}, 400},
		{"query and decoy body", func(i int) (string, string, string) {
			return "/login?username=victim", urlenc, fmt.Sprintf("username=decoy%d&password=guess%d", i, i)
		}, 400},
		{"query and decoy multipart", func(i int) (string, string, string) {
			b, ct := multipartForm("username", fmt.Sprintf("decoy%d", i), "password", "x")
			return "/login?username=victim", ct, b
		}, 400},
		{"badly escaped", func(i int) (string, string, string) {
			return "/login", urlenc, fmt.Sprintf("username=victim&password=guess%d&x=%%zz", i)
		}, 400},
		{"semicolon", func(i int) (string, string, string) {
			return "/login", urlenc, fmt.Sprintf("username=victim;password=guess%d", i)
		}, 400},
		{"decoy first", func(i int) (string, string, string) {
			return "/login", urlenc, fmt.Sprintf("username=decoy%d&username=victim", i)
		}, 400},
		{"over the bound", func(i int) (string, string, string) {
			return "/login", urlenc, fmt.Sprintf("username=victim&password=guess%d&pad=%s", i, pad)
		}, 413},
		{"json", func(i int) (string, string, string) {
			return "/login", "application/json", fmt.Sprintf(`{"username":"victim","password":"guess%d"}`, i)
		}, 415},
	}
	for n, e := range encs {
		t.Run(e.name, func(t *testing.T) {
			l := env.Limiter(t, policy(fmt.Sprintf("login%d", n), core.Per(10, 15*time.Minute)))
			ip := env.Limiter(t, policy(fmt.Sprintf("login%d-ip", n), core.Per(100, 15*time.Minute)))
			c := build(t, h, App{Routes: []Route{{Method: "POST", Path: "/login", Mw: mw(l, httplimit.WithClock(env.Clock),
				httplimit.WithKey(user), httplimit.WithIdentity(), httplimit.WithFallbackKey(keyfuncs.PeerIP().Key), httplimit.WithCheck(ip, nil))}}})
			reached := map[string]int{}
			for peer := range 20 {
				for guess := range 3 {
					target, ct, body := e.req(3*peer + guess)
					for _, reply := range [][2]string{{ReplyForm, "username"}, {ReplyIdentity, "1"}} {
						req := method(http.MethodPost, target, fmt.Sprintf("192.0.2.%d:4000", peer+1), "Content-Type", ct, reply[0], reply[1])
						req.Body = body
						resp := c(req)
						switch {
						case resp.Status == http.StatusOK:
							reached[reply[0]+" "+resp.Body]++
						case e.status != 0:
							if resp.Status != e.status || !strings.Contains(resp.Body, `"status":`+strconv.Itoa(e.status)) {
								t.Fatalf("%s from peer %d: %d %s; want %d and its problem", e.name, peer, resp.Status, resp.Body, e.status)
							}
						case resp.Status != http.StatusTooManyRequests:
							t.Fatalf("%s from peer %d: %d %s; want 200 or 429", e.name, peer, resp.Status, resp.Body)
						}
					}
				}
			}
			byForm, byID := reached[ReplyForm+" form:victim"], reached[ReplyIdentity+" identity:victim"]
			if byForm+byID > 10 {
				t.Errorf("%s: %d guesses reached a handler reading the username by form parsing and %d by Identity, %d in all; want at most the limit, 10 (%v)", e.name, byForm, byID, byForm+byID, reached)
			}
			want := 0
			if e.status == 0 {
				want = 10 // the 10 the limit admits
			}
			if byForm+byID != want {
				t.Errorf("%s: %d guesses reached the handler; want %d (%v)", e.name, byForm+byID, want, reached)
			}
			for k, n := range reached {
				if k != ReplyForm+" form:victim" && k != ReplyIdentity+" identity:victim" {
					t.Errorf("%s: %d handler replies %q: the handler saw another username than the one counted", e.name, n, k)
				}
			}
		})
	}
}

// formBodyMax is the body FormField reads at most (64 KiB, its
// documented bound).
const formBodyMax = 64 << 10
