package adaptertest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// ReplyAction is the request header telling the suite's routes to end
// the request otherwise than with a status, for the rows of counting by
// outcome that are not a status (docs/policies.md, "What each outcome
// counts as"): one of ActPanic, ActNothing, ActGone.
const ReplyAction = "X-Reply-Action"

// The values of ReplyAction.
const (
	// ActPanic: the handler panics (with a value the client reports).
	ActPanic = "panic"
	// ActNothing: the handler returns without writing anything.
	ActNothing = "nothing"
	// ActGone: the client goes away while the handler runs (the request's
	// context is cancelled: net/http's, gin's and echo's request context;
	// fiber's user context), and the handler then answers 200 "ok"
	// without noticing.
	ActGone = "gone"
)

// Panicked is Response.Status of a request whose handler panicked: the
// panic reached the client function, which recovered it.
const Panicked = -1

// cancelKey is the context key of the request's cancel function, set by
// serveHTTP: calling it is the client going away.
type cancelKey struct{}

// act performs the ReplyAction a (none when ""): it reports whether the
// handler must return at once, writing nothing. cancel is the client
// going away.
func act(a string, cancel func()) (stop bool) {
	switch a {
	case ActPanic:
		panic("adaptertest: the handler panics")
	case ActNothing:
		return true
	case ActGone:
		cancel()
	}
	return false
}

// httpAct is act for a handler of net/http, gin or echo, on request r.
func httpAct(r *http.Request) bool {
	return act(r.Header.Get(ReplyAction), func() {
		if c, ok := r.Context().Value(cancelKey{}).(context.CancelFunc); ok {
			c()
		}
	})
}

// fiberAct is act for a fiber handler: the client going away is a user
// context that has ended (fasthttp reports no disconnect to handlers).
func fiberAct(c *fiber.Ctx) bool {
	return act(c.Get(ReplyAction), func() {
		ctx, cancel := context.WithCancel(c.UserContext())
		cancel()
		c.SetUserContext(ctx)
	})
}

// recovered turns a panic of the served request into a Response with
// status Panicked and the panic's value as its body.
func recovered(resp *Response) {
	if p := recover(); p != nil {
		*resp = Response{Status: Panicked, Header: http.Header{}, Body: fmt.Sprint(p)}
	}
}

func acted(target, peer, action string, kv ...string) Request {
	r := post(target, peer, 0, kv...)
	r.Header[ReplyAction] = action
	return r
}

func init() { scenarios = append(scenarios, outcomeFailSafeScenarios...) }

// outcomeFailSafeScenarios are issue 40's rows of counting by outcome
// that are no status: a panic, a handler that writes nothing and a client
// that went away are each a counted failure (charged; under ChargeFirst
// not refunded), never a success (never a reset).
var outcomeFailSafeScenarios = []scenario{
	{"OutcomeFailsSafe", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("login", core.PerMinute(2)))
		c := build(t, h, App{Routes: []Route{{Method: "POST", Path: "/login", Mw: mw(l, httplimit.WithClock(env.Clock),
			httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ResetOnSuccess: true}))}}})
		k := "login#" + h.Scope("POST", "/login") + "|" + IP1
		peek, charge, reset := "peek:"+k, "charge:"+k, "reset:"+k
		Play(t, env, c, []Step{
			// a panic is charged (the panic reaches the client)
			{Req: acted("/login", Peer1, ActPanic), Status: Panicked, Keys: []string{peek, charge}},
			// so is a handler that writes nothing (net/http sends 200);
			// remaining 0 here shows the panic was charged
			{Req: acted("/login", Peer1, ActNothing), Status: 200, Header: XRL(2, 0, 60*time.Second), Keys: []string{peek, charge}},
			// both charged: the limit is reached
			{Req: post("/login", Peer1, 0), Status: 429, Problem: "login", Header: XRL(2, 0, 60*time.Second).With("Retry-After", "30"), Keys: []string{peek}},
			// a client that went away: charged, though the handler wrote
			// 200 "ok" (never a success, never a reset)
			{Advance: 60 * time.Second, Req: acted("/login", Peer1, ActGone), Status: 200, Header: XRL(2, 1, 90*time.Second), Keys: []string{peek, charge}},
			// a success is one (reset); remaining 0 shows the charge
			{Req: post("/login", Peer1, 0), Status: 200, Body: "ok", Header: XRL(2, 0, 120*time.Second), Keys: []string{peek, reset}},
			{Req: post("/login", Peer1, 0), Status: 200, Body: "ok", Header: XRL(2, 1, 90*time.Second), Keys: []string{peek, reset}},
		})
	}},
	{"OutcomeFailsSafeChargeFirst", func(t *testing.T, h Harness, env *Env) {
		l := env.Limiter(t, policy("login", core.PerMinute(3)))
		c := build(t, h, App{Routes: []Route{{Method: "POST", Path: "/login", Mw: mw(l, httplimit.WithClock(env.Clock),
			httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ChargeFirst: true}))}}})
		k := "login#" + h.Scope("POST", "/login") + "|" + IP1
		Play(t, env, c, []Step{
			// taken first; a success is refunded ...
			{Req: post("/login", Peer1, 0), Status: 200, Body: "ok", Header: XRL(3, 2, 20*time.Second), Keys: []string{k, "refund:" + k}},
			// ... a panic, nothing written and a client gone are not
			{Req: acted("/login", Peer1, ActPanic), Status: Panicked, Keys: []string{k}},
			{Req: acted("/login", Peer1, ActNothing), Status: 200, Header: XRL(3, 1, 40*time.Second), Keys: []string{k}},
			{Req: acted("/login", Peer1, ActGone), Status: 200, Header: XRL(3, 0, 60*time.Second), Keys: []string{k}},
			{Req: post("/login", Peer1, 0), Status: 429, Problem: "login", Header: XRL(3, 0, 60*time.Second).With("Retry-After", "20"), Keys: []string{k}},
		})
	}},
}
