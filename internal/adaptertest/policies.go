package adaptertest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// ReplyStatus is the request header whose value (a status code) the
// suite's routes answer with instead of 200 "ok": net/http and gin write
// it, echo and fiber return their framework's error for statuses >= 400
// (echo.NewHTTPError, fiber.NewError), as handlers usually do.
const ReplyStatus = "X-Reply-Status"

func replyStatus(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 200 || n > 599 {
		return 0
	}
	return n
}

// The quota verbs, recorded as "<verb>:policy#key" (Take is recorded as
// "policy#key"), so that the scenarios of counting by outcome can assert
// what was peeked, charged, refunded and reset.
func (s *RecStore) verb(verb, key string, p *core.Policy) (storekit.VerbStore, error) {
	s.mu.Lock()
	s.keys = append(s.keys, verb+":"+p.Name+"#"+key)
	fail := s.fail
	s.mu.Unlock()
	return s.inner.(storekit.VerbStore), fail
}

// Peek implements storekit.VerbStore.
func (s *RecStore) Peek(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, err := s.verb("peek", key, p)
	if err != nil {
		return core.Decision{}, err
	}
	return vs.Peek(ctx, key, p, now, cost)
}

// Reset implements storekit.VerbStore.
func (s *RecStore) Reset(ctx context.Context, key string, p *core.Policy) error {
	vs, err := s.verb("reset", key, p)
	if err != nil {
		return err
	}
	return vs.Reset(ctx, key, p)
}

// Charge implements storekit.VerbStore.
func (s *RecStore) Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, err := s.verb("charge", key, p)
	if err != nil {
		return core.Decision{}, err
	}
	return vs.Charge(ctx, key, p, now, cost)
}

// Credit implements storekit.VerbStore.
func (s *RecStore) Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	vs, err := s.verb("refund", key, p)
	if err != nil {
		return core.Decision{}, err
	}
	return vs.Credit(ctx, key, p, now, cost)
}

var _ storekit.VerbStore = (*RecStore)(nil)

func post(target, peer string, status int, kv ...string) Request {
	r := method(http.MethodPost, target, peer, kv...)
	if status != 0 {
		r.Header[ReplyStatus] = strconv.Itoa(status)
	}
	return r
}

func init() { scenarios = append(scenarios, policyScenarios...) }

// policyScenarios are issue 26's: limits chosen per request (tiers and
// overrides) and counting by outcome.
var policyScenarios = []scenario{
	{"Tiers", func(t *testing.T, h Harness, env *Env) {
		plan, err := keyfuncs.Header("X-Plan")
		if err != nil {
			t.Fatal(err)
		}
		user, err := keyfuncs.Header("X-User")
		if err != nil {
			t.Fatal(err)
		}
		free := env.Limiter(t, policy("api", core.PerMinute(2)))
		pro := env.Limiter(t, policy("api/pro", core.PerMinute(3)))
		big := env.Limiter(t, policy("api/big", core.PerMinute(4)))
		c := build(t, h, App{
			Global: mw(free, httplimit.WithClock(env.Clock), httplimit.WithKey(user),
				httplimit.WithTiers(plan, map[string]*core.Limiter{"pro": pro}),
				httplimit.WithOverrides(map[string]*core.Limiter{"big": big})),
			Routes: []Route{{Method: "GET", Path: "/v1/x"}},
		})
		scope := h.Scope("GET", "/v1/x")
		var steps []Step
		quota := func(pol string, limit int64, userKey, tier string) {
			k := pol + "#" + scope + "|" + userKey
			for i := int64(1); i <= limit; i++ {
				steps = append(steps, Step{Req: get("/v1/x", Peer1, "X-User", userKey, "X-Plan", tier), Status: 200,
					Header: XRL(limit, limit-i, time.Duration(i)*time.Minute/time.Duration(limit)), Keys: []string{k}})
			}
			steps = append(steps, Step{Req: get("/v1/x", Peer1, "X-User", userKey, "X-Plan", tier), Status: 429, Problem: pol,
				Header: XRL(limit, 0, time.Minute).With("Retry-After", strconv.FormatInt(int64(60/limit), 10)), Keys: []string{k}})
		}
		quota("api", 2, "alice", "")        // no tier: the default
		quota("api/pro", 3, "alice", "pro") // upgraded: a fresh pro quota, never the free one's
		quota("api", 2, "bob", "gold")      // an unknown tier: the default
		quota("api/big", 4, "big", "pro")   // an override beats the tier
		Play(t, env, c, steps)
	}},
	{"OutcomeCountsFailuresOnly", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("login", core.PerMinute(2)))
		c := build(t, h, App{Routes: []Route{{Method: "POST", Path: "/login", Mw: mw(l, httplimit.WithClock(env.Clock),
			httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ResetOnSuccess: true}))}}})
		k := "login#" + h.Scope("POST", "/login") + "|" + IP1
		peek, charge, reset := "peek:"+k, "charge:"+k, "reset:"+k
		Play(t, env, c, []Step{
			// a failure: peeked before, charged after
			{Req: post("/login", Peer1, 401), Status: 401, Header: XRL(2, 1, 30*time.Second), Keys: []string{peek, charge}},
			// a success: not charged, and it clears the failures
			{Req: post("/login", Peer1, 0), Status: 200, Body: "ok", Header: XRL(2, 0, 60*time.Second), Keys: []string{peek, reset}},
			{Req: post("/login", Peer1, 401), Status: 401, Header: XRL(2, 1, 30*time.Second), Keys: []string{peek, charge}},
			{Req: post("/login", Peer1, 401), Status: 401, Header: XRL(2, 0, 60*time.Second), Keys: []string{peek, charge}},
			// over the limit: denied before the handler, nothing charged
			{Req: post("/login", Peer1, 0), Status: 429, Problem: "login", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{peek}},
			// a status that does not count and is no success: neither
			// charged nor reset
			{Advance: 30 * time.Second, Req: post("/login", Peer1, 500), Status: 500, Header: XRL(2, 0, 90*time.Second), Keys: []string{peek}},
			{Req: post("/login", Peer1, 401), Status: 401, Header: XRL(2, 0, 90*time.Second), Keys: []string{peek, charge}},
			{Req: post("/login", Peer1, 0), Status: 429, Problem: "login", Header: XRL(2, 0, 90*time.Second).With("Retry-After", "30"), Keys: []string{peek}},
		})
	}},
	{"OutcomeChargeFirst", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("api", core.PerMinute(2)))
		c := build(t, h, App{Global: mw(l, httplimit.WithClock(env.Clock),
			httplimit.WithOutcome(httplimit.Outcome{Count: func(s int) bool { return s >= 400 }, ChargeFirst: true})),
			Routes: []Route{{Method: "POST", Path: "/x"}}})
		k := "api#" + h.Scope("POST", "/x") + "|" + IP1
		Play(t, env, c, []Step{
			// taken first, refunded when the response does not count
			{Req: post("/x", Peer1, 0), Status: 200, Body: "ok", Header: XRL(2, 1, 30*time.Second), Keys: []string{k, "refund:" + k}},
			{Req: post("/x", Peer1, 204), Status: 204, Header: XRL(2, 1, 30*time.Second), Keys: []string{k, "refund:" + k}},
			{Req: post("/x", Peer1, 400), Status: 400, Header: XRL(2, 1, 30*time.Second), Keys: []string{k}},
			{Req: post("/x", Peer1, 503), Status: 503, Header: XRL(2, 0, 60*time.Second), Keys: []string{k}},
			{Req: post("/x", Peer1, 0), Status: 429, Problem: "api", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{k}},
		})
	}},
	{"OutcomeHybridResetsPrimaryOnly", func(t *testing.T, h Harness, env *Env) {
		user, err := keyfuncs.Header("X-User")
		if err != nil {
			t.Fatal(err)
		}
		login := env.Limiter(t, policy("login", core.PerMinute(2)))
		ip := env.Limiter(t, policy("login-ip", core.PerMinute(2)))
		c := build(t, h, App{Routes: []Route{{Method: "POST", Path: "/login", Mw: mw(login, httplimit.WithClock(env.Clock),
			httplimit.WithKey(user), httplimit.WithCheck(ip, nil),
			httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ResetOnSuccess: true}))}}})
		scope := h.Scope("POST", "/login")
		ka, kb, ki := "login#"+scope+"|a", "login#"+scope+"|b", "login-ip#"+scope+"|"+IP1
		Play(t, env, c, []Step{
			{Req: post("/login", Peer1, 401, "X-User", "a"), Status: 401, Header: XRL(2, 1, 30*time.Second),
				Keys: []string{"peek:" + ka, "peek:" + ki, "charge:" + ka, "charge:" + ki}},
			// a's success resets a's count, not the IP's
			{Req: post("/login", Peer1, 0, "X-User", "a"), Status: 200, Body: "ok", Header: XRL(2, 0, 60*time.Second),
				Keys: []string{"peek:" + ka, "peek:" + ki, "reset:" + ka}},
			// b is fresh, the IP is not: the IP check binds
			{Req: post("/login", Peer1, 401, "X-User", "b"), Status: 401, Header: XRL(2, 0, 60*time.Second),
				Keys: []string{"peek:" + kb, "peek:" + ki, "charge:" + kb, "charge:" + ki}},
			{Req: post("/login", Peer1, 401, "X-User", "a"), Status: 429, Problem: "login-ip", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"),
				Keys: []string{"peek:" + ka, "peek:" + ki}},
		})
	}},
}

// ReplyForm is the request header naming a form field the suite's routes
// answer with ("form:<value>", as the framework's own form parsing reads
// it), to show that a key function that read the body left it whole.
const ReplyForm = "X-Reply-Form"

func withBody(r Request, body string) Request {
	r.Body = body
	return r
}

func form(target, peer, body string, kv ...string) Request {
	r := method(http.MethodPost, target, peer, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, kv...)...)
	r.Body = body
	return r
}

func init() {
	scenarios = append(scenarios, scenario{"FormFieldKey", func(t *testing.T, h Harness, env *Env) {
		user, err := keyfuncs.FormField("username")
		if err != nil {
			t.Fatal(err)
		}
		l := env.Limiter(t, policy("login", core.PerMinute(2)))
		c := build(t, h, App{Routes: []Route{{Method: "POST", Path: "/login", Mw: mw(l, httplimit.WithClock(env.Clock),
			httplimit.WithKey(user), httplimit.WithIdentity(), httplimit.WithNoKeyDeny())}}})
		scope := h.Scope("POST", "/login")
		ka, kb := "login#"+scope+"|alice", "login#"+scope+"|bob"
		big := "username=carol&pad=" + strings.Repeat("x", formBodyMax)
		Play(t, env, c, []Step{
			// keyed by the username; the handler still reads the form
			{Req: form("/login", Peer1, "username=alice&password=x", ReplyForm, "password"), Status: 200, Body: "form:x", Header: XRL(2, 1, 30*time.Second), Keys: []string{ka}},
			{Req: form("/login", Peer1, "password=y&username=alice", ReplyForm, "username"), Status: 200, Body: "form:alice", Header: XRL(2, 0, 60*time.Second), Keys: []string{ka}},
			{Req: form("/login", Peer1, "username=alice"), Status: 429, Problem: "login", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{ka}},
			// another username from the same peer has its own quota
			{Req: form("/login", Peer1, "username=bob", ReplyForm, "username"), Status: 200, Body: "form:bob", Header: XRL(2, 1, 30*time.Second), Keys: []string{kb}},
			// the handler's Identity is the username counted
			{Req: form("/login", Peer1, "username=+bob+", ReplyIdentity, "1"), Status: 200, Body: "identity:bob", Header: XRL(2, 0, 60*time.Second), Keys: []string{kb}},
			// no field, no body: no key (here: denied, 403)
			{Req: form("/login", Peer1, "password=x"), Status: 403, Body: NoKeyBody},
			{Req: method(http.MethodPost, "/login", Peer1, "Content-Type", "application/json"), Status: 403, Body: NoKeyBody},
			// a body over 64 KiB, malformed encoding, another content
			// type: refused with the refusal's status, nothing counted
			{Req: form("/login", Peer1, big), Status: 413, Body: refusedBody(413, "The form body is over 65536 bytes or 64 parts.")},
			{Req: form("/login", Peer1, "username=%zz"), Status: 400, Body: refusedBody(400, "The request body is not valid form encoding.")},
			{Req: withBody(method(http.MethodPost, "/login", Peer1, "Content-Type", "application/json"), `{"username":"alice"}`), Status: 415,
				Body: refusedBody(415, "The request body must be application/x-www-form-urlencoded or multipart/form-data, without Content-Encoding.")},
		})
	}})
}
