package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
	"github.com/limitkit/limitkit/keyfuncs"
)

// The HTTP conformance suite's scenarios that apply to gRPC
// (internal/adaptertest), on gRPC: the same clock, recording store, peers
// and expected store keys ("policy#<full method>|<client key>"), with a
// status code and response metadata in place of an HTTP status and
// headers.

// watchedMD are the metadata keys a step compares exactly: present with
// the expected value (in the header of an admitted call, the trailer of a
// denied one), or absent from both.
var watchedMD = []string{
	"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after", "grpc-retry-pushback-ms",
	"ratelimit-policy", "ratelimit", "x-ratelimit-degraded",
}

// md is an expected set of watched metadata.
type md map[string]string

// xrl is the x-ratelimit triple, the reset in epoch seconds from T0.
func xrl(limit, remaining int64, resetFromT0 time.Duration) md {
	out := md{}
	for k, v := range adaptertest.XRL(limit, remaining, resetFromT0) {
		out[strings.ToLower(k)] = v
	}
	return out
}

// denied is m plus a quota denial's retry-after (whole seconds) and
// pushback (milliseconds) for a wait of d.
func (m md) denied(d time.Duration) md {
	return m.with("retry-after", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10),
		"grpc-retry-pushback-ms", strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10))
}

// with is m plus kv pairs.
func (m md) with(kv ...string) md {
	out := md{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// gstep is one call and what must come back.
type gstep struct {
	advance time.Duration // moved on the clock before the call
	method  string        // default sayMethod
	peer    string        // "ip:port", a Unix socket path, or "@"; default adaptertest.Peer1
	md      []string      // request metadata pairs
	code    codes.Code
	want    md            // watched response metadata
	retry   time.Duration // RetryInfo's delay on a ResourceExhausted or Unavailable; noRetry: none
	keys    []string      // "policy#key" the store was asked for, in order
}

const noRetry = -1

// grig serves the test services through interceptors and dials one
// connection per peer address, on first use.
type grig struct {
	t     *testing.T
	lis   *peerListener
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newGRig(t *testing.T, ics ...*grpclimit.Interceptor) *grig {
	t.Helper()
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	for _, ic := range ics {
		unary = append(unary, ic.UnaryServerInterceptor())
		stream = append(stream, ic.StreamServerInterceptor())
	}
	r := &grig{t: t, lis: &peerListener{bufconn.Listen(1 << 20), make(chan net.Addr, 1)}, conns: map[string]*grpc.ClientConn{}}
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	register(s)
	go func() { _ = s.Serve(r.lis) }()
	t.Cleanup(s.Stop)
	return r
}

// peerAddr is the net.Addr the server sees for a step's peer.
func peerAddr(t *testing.T, p string) net.Addr {
	if p == "@" || strings.HasPrefix(p, "/") {
		return &net.UnixAddr{Name: p, Net: "unix"}
	}
	ap, err := netip.ParseAddrPort(p)
	if err != nil {
		t.Fatal(err)
	}
	return net.TCPAddrFromAddrPort(ap)
}

func (r *grig) conn(p string) *grpc.ClientConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cc, ok := r.conns[p]; ok {
		return cc
	}
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			r.lis.addrs <- peerAddr(r.t, p) // this connection is this peer
			return r.lis.DialContext(ctx)
		}))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { cc.Close() })
	r.conns[p] = cc
	return cc
}

// play runs steps against r, checking each against env's recorded keys.
func (r *grig) play(env *adaptertest.Env, steps []gstep) {
	t := r.t
	t.Helper()
	env.Store.Keys()
	for i, s := range steps {
		env.Clock.Advance(s.advance)
		method, p := s.method, s.peer
		if method == "" {
			method = sayMethod
		}
		if p == "" {
			p = adaptertest.Peer1
		}
		var res result
		if method == streamMethod {
			res.code, res.header = openStream(t, r.conn(p), s.md...)
			res.st = status.New(res.code, "")
		} else {
			res = call(t, r.conn(p), method, s.md...)
		}
		keys := env.Store.Keys()
		if res.code != s.code {
			t.Fatalf("step %d %s from %s: %v, want %v", i, method, p, res.st, s.code)
		}
		got := md{}
		for _, k := range watchedMD {
			vs := append(res.header.Get(k), res.trailer.Get(k)...)
			if len(vs) > 1 {
				t.Errorf("step %d: %s sent %d times", i, k, len(vs))
			}
			if len(vs) > 0 {
				got[k] = vs[0]
			}
		}
		want := s.want
		if want == nil {
			want = md{}
		}
		if !equalMD(got, want) {
			t.Errorf("step %d %s from %s: metadata %v, want %v", i, method, p, got, want)
		}
		if s.code == codes.OK && len(res.trailer) > 0 {
			for k := range res.trailer {
				if !strings.HasPrefix(k, "grpc-") {
					t.Errorf("step %d: admitted call with trailer %v", i, res.trailer)
				}
			}
		}
		replied := slices.Contains(s.md, replyCode) // the handler's own code, after the admission's header
		if s.code != codes.OK && method != streamMethod && !replied && len(res.header) != 0 {
			t.Errorf("step %d: a denial with header %v (grpc-go retries only trailers-only answers)", i, res.header)
		}
		if (s.code == codes.ResourceExhausted || s.code == codes.Unavailable) && method != streamMethod && !replied {
			checkDetails(t, i, res.st, s.retry)
		}
		if !equalKeys(keys, s.keys) {
			t.Errorf("step %d %s from %s: store keys %q, want %q", i, method, p, keys, s.keys)
		}
	}
}

func checkDetails(t *testing.T, i int, st *status.Status, retry time.Duration) {
	t.Helper()
	var ri *errdetails.RetryInfo
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		switch v := d.(type) {
		case *errdetails.RetryInfo:
			ri = v
		case *errdetails.ErrorInfo:
			info = v
		}
	}
	switch {
	case retry == noRetry && ri != nil:
		t.Errorf("step %d: RetryInfo %v on a denial no wait helps", i, ri)
	case retry != noRetry && (ri == nil || ri.GetRetryDelay().AsDuration() != retry):
		t.Errorf("step %d: RetryInfo %v, want %v", i, ri, retry)
	}
	want := map[codes.Code]string{codes.ResourceExhausted: "RATE_LIMIT_EXCEEDED", codes.Unavailable: "RATE_LIMITER_UNAVAILABLE"}[st.Code()]
	if info == nil || info.Reason != want || info.Domain != "limitkit" {
		t.Errorf("step %d: ErrorInfo %v, want reason %s", i, info, want)
	}
}

func equalMD(a, b md) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalKeys(a, b []string) bool {
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

func pol(name string, limits ...core.Limit) core.Policy {
	return core.Policy{Name: name, Limits: limits}
}

// only limits the one full method m (a per-route middleware's place).
func only(m string) httplimit.Option {
	return httplimit.WithSkip(func(r keyfuncs.Request) bool { return r.Route() != m })
}

func header(t *testing.T, name string) keyfuncs.Func {
	t.Helper()
	f, err := keyfuncs.Header(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const (
	ip1, ip2     = adaptertest.IP1, adaptertest.IP2
	peer1, peer2 = adaptertest.Peer1, adaptertest.Peer2
)

var gscenarios = []struct {
	name string
	run  func(t *testing.T, env *adaptertest.Env)
}{
	{"OutcomeCountsFailuresOnly", func(t *testing.T, env *adaptertest.Env) {
		// the HTTP suite's, with Unauthenticated for 401 and NotFound for
		// a 500: a code that does not count and is no success
		l := env.Limiter(t, pol("login", core.PerMinute(2)))
		r := newGRig(t, grpclimit.MustNew(l, grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated), ResetOnSuccess: true})))
		k := "login#" + sayMethod + "|" + ip1
		peek, charge, reset := "peek:"+k, "charge:"+k, "reset:"+k
		fail, notFound := []string{replyCode, "16"}, []string{replyCode, "5"}
		r.play(env, []gstep{
			// a failure: peeked before, charged after
			{md: fail, code: codes.Unauthenticated, want: xrl(2, 1, 30*time.Second), keys: []string{peek, charge}},
			// a success: not charged, and it clears the failures
			{code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: []string{peek, reset}},
			{md: fail, code: codes.Unauthenticated, want: xrl(2, 1, 30*time.Second), keys: []string{peek, charge}},
			{md: fail, code: codes.Unauthenticated, want: xrl(2, 0, 60*time.Second), keys: []string{peek, charge}},
			// over the limit: denied before the handler, nothing charged
			{code: codes.ResourceExhausted, want: xrl(2, 0, 60*time.Second).denied(30 * time.Second), retry: 30 * time.Second, keys: []string{peek}},
			// neither charged nor reset
			{advance: 30 * time.Second, md: notFound, code: codes.NotFound, want: xrl(2, 0, 90*time.Second), keys: []string{peek}},
			{md: fail, code: codes.Unauthenticated, want: xrl(2, 0, 90*time.Second), keys: []string{peek, charge}},
			{code: codes.ResourceExhausted, want: xrl(2, 0, 90*time.Second).denied(30 * time.Second), retry: 30 * time.Second, keys: []string{peek}},
		})
	}},
	{"Tiers", func(t *testing.T, env *adaptertest.Env) {
		// the HTTP suite's: the tier (metadata x-plan) or an override
		// (the client key) picks the limiter, each with its own quota
		free := env.Limiter(t, pol("api", core.PerMinute(2)))
		pro := env.Limiter(t, pol("api/pro", core.PerMinute(3)))
		big := env.Limiter(t, pol("api/big", core.PerMinute(4)))
		r := newGRig(t, grpclimit.MustNew(free, httplimit.WithKey(header(t, "x-user")),
			httplimit.WithTiers(header(t, "x-plan"), map[string]*core.Limiter{"pro": pro}),
			httplimit.WithOverrides(map[string]*core.Limiter{"big": big})))
		var steps []gstep
		quota := func(policy string, limit int64, user, tier string) {
			k := []string{policy + "#" + sayMethod + "|" + user}
			m := []string{"x-user", user, "x-plan", tier}
			for i := int64(1); i <= limit; i++ {
				steps = append(steps, gstep{md: m, code: codes.OK, want: xrl(limit, limit-i, time.Duration(i)*time.Minute/time.Duration(limit)), keys: k})
			}
			wait := time.Minute / time.Duration(limit)
			steps = append(steps, gstep{md: m, code: codes.ResourceExhausted, want: xrl(limit, 0, time.Minute).denied(wait), retry: wait, keys: k})
		}
		quota("api", 2, "alice", "")        // no tier: the default
		quota("api/pro", 3, "alice", "pro") // upgraded: a fresh pro quota
		quota("api", 2, "bob", "gold")      // an unknown tier: the default
		quota("api/big", 4, "big", "pro")   // an override beats the tier
		r.play(env, steps)
	}},
	{"OutcomeChargeFirst", func(t *testing.T, env *adaptertest.Env) {
		l := env.Limiter(t, pol("api", core.PerMinute(2)))
		r := newGRig(t, grpclimit.MustNew(l, grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeNotOK, ChargeFirst: true})))
		k := "api#" + sayMethod + "|" + ip1
		r.play(env, []gstep{
			// taken first, refunded when the call does not count
			{code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{k, "refund:" + k}},
			{code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{k, "refund:" + k}},
			{md: []string{replyCode, "3"}, code: codes.InvalidArgument, want: xrl(2, 1, 30*time.Second), keys: []string{k}},
			{md: []string{replyCode, "14"}, code: codes.Unavailable, want: xrl(2, 0, 60*time.Second), keys: []string{k}},
			{code: codes.ResourceExhausted, want: xrl(2, 0, 60*time.Second).denied(30 * time.Second), retry: 30 * time.Second, keys: []string{k}},
		})
	}},
	{"PerMethodQuotaExact", func(t *testing.T, env *adaptertest.Env) {
		// GlobalLimit: one interceptor on every method; each method its own
		// quota per client; the exact retry delay, not a second early
		l := env.Limiter(t, pol("global", core.PerMinute(2)))
		r := newGRig(t, grpclimit.MustNew(l))
		ka, kb, k2 := "global#"+sayMethod+"|"+ip1, "global#"+otherMethod+"|"+ip1, "global#"+sayMethod+"|"+ip2
		r.play(env, []gstep{
			{code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{ka}},
			{code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: []string{ka}},
			{code: codes.ResourceExhausted, want: xrl(2, 0, 60*time.Second).denied(30 * time.Second), retry: 30 * time.Second, keys: []string{ka}},
			{method: otherMethod, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{kb}},
			{peer: peer2, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{k2}},
			{advance: 30*time.Second - time.Millisecond, code: codes.ResourceExhausted, want: xrl(2, 0, 60*time.Second).denied(time.Millisecond),
				retry: time.Millisecond, keys: []string{ka}},
			{advance: time.Millisecond, code: codes.OK, want: xrl(2, 0, 90*time.Second), keys: []string{ka}},
		})
	}},
	{"PerAPIKeyQuotaExact", func(t *testing.T, env *adaptertest.Env) {
		l := env.Limiter(t, pol("key", core.PerMinute(3)))
		r := newGRig(t, grpclimit.MustNew(l, httplimit.WithKey(header(t, "x-api-key"))))
		k := func(m, key string) []string { return []string{"key#" + m + "|" + key} }
		var steps []gstep
		for _, m := range []string{sayMethod, otherMethod} {
			for _, key := range []string{"alice", "bob"} {
				for i := int64(1); i <= 3; i++ {
					steps = append(steps, gstep{method: m, md: []string{"x-api-key", key}, code: codes.OK,
						want: xrl(3, 3-i, time.Duration(i)*20*time.Second), keys: k(m, key)})
				}
				// another peer, same key: the key's quota
				steps = append(steps, gstep{method: m, peer: peer2, md: []string{"x-api-key", key}, code: codes.ResourceExhausted,
					want: xrl(3, 0, time.Minute).denied(20 * time.Second), retry: 20 * time.Second, keys: k(m, key)})
			}
		}
		r.play(env, steps)
	}},
	{"StreamLimitedAtOpen", func(t *testing.T, env *adaptertest.Env) {
		l := env.Limiter(t, pol("s", core.PerMinute(2)))
		r := newGRig(t, grpclimit.MustNew(l))
		k := []string{"s#" + streamMethod + "|" + ip1}
		r.play(env, []gstep{
			{method: streamMethod, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: k},
			{method: streamMethod, code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: k},
			{method: streamMethod, code: codes.ResourceExhausted, keys: k},
			{code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{"s#" + sayMethod + "|" + ip1}},
		})
	}},
	{"HybridUserAndIP", func(t *testing.T, env *adaptertest.Env) {
		user := env.Limiter(t, pol("user", core.PerMinute(2)))
		ip := env.Limiter(t, pol("ip", core.PerMinute(3)))
		r := newGRig(t, grpclimit.MustNew(user, httplimit.WithKey(header(t, "x-user")), httplimit.WithNoKeySkip(), httplimit.WithCheck(ip, nil)))
		sc := sayMethod + "|"
		ua, ub, i1, i2 := "user#"+sc+"alice", "user#"+sc+"bob", "ip#"+sc+ip1, "ip#"+sc+ip2
		alice, bob := []string{"x-user", "alice"}, []string{"x-user", "bob"}
		r.play(env, []gstep{
			{md: alice, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{ua, i1}},
			{md: alice, code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: []string{ua, i1}},
			{md: alice, code: codes.ResourceExhausted, want: xrl(2, 0, 60*time.Second).denied(30 * time.Second), retry: 30 * time.Second, keys: []string{ua}},
			{md: bob, code: codes.OK, want: xrl(3, 0, 60*time.Second), keys: []string{ub, i1}},
			{md: bob, code: codes.ResourceExhausted, want: xrl(3, 0, 60*time.Second).denied(20 * time.Second), retry: 20 * time.Second, keys: []string{ub, i1}},
			{peer: peer2, code: codes.OK, want: xrl(3, 2, 20*time.Second), keys: []string{i2}},
		})
	}},
	{"ShadowAndSoft", func(t *testing.T, env *adaptertest.Env) {
		sp := pol("shadow", core.PerMinute(1))
		sp.Shadow = true
		so := pol("soft", core.PerMinute(2))
		so.SoftPercent = 50
		r := newGRig(t, grpclimit.MustNew(env.Limiter(t, sp), only(sayMethod)), grpclimit.MustNew(env.Limiter(t, so), only(otherMethod)))
		ks, ko := []string{"shadow#" + sayMethod + "|" + ip1}, []string{"soft#" + otherMethod + "|" + ip1}
		r.play(env, []gstep{
			{code: codes.OK, want: xrl(1, 0, time.Minute), keys: ks},
			{code: codes.OK, want: xrl(1, 0, time.Minute), keys: ks}, // would be denied: passes
			{method: otherMethod, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: ko},
			{method: otherMethod, code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: ko},
			{method: otherMethod, code: codes.OK, want: xrl(2, 0, 90*time.Second), keys: ko}, // 50 % over tolerated
			{method: otherMethod, code: codes.ResourceExhausted, want: xrl(2, 0, 90*time.Second).denied(30 * time.Second), retry: 30 * time.Second, keys: ko},
		})
	}},
	{"StoreFailureModes", func(t *testing.T, env *adaptertest.Env) {
		// open admits without metadata (the degraded mark is metadata
		// too), closed answers Unavailable with a 1 s retry, neither shows
		// the store's error; local decides on the fallback store
		open := pol("open", core.PerMinute(1))
		closed := pol("closed", core.PerMinute(5))
		closed.FailMode = core.FailClosed
		var mu sync.Mutex
		var errs []error
		hook := httplimit.WithErrorHook(func(_ context.Context, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
		r := newGRig(t,
			grpclimit.MustNew(env.Limiter(t, open), only(sayMethod), hook, httplimit.WithDegradedHeader("X-RateLimit-Degraded")),
			grpclimit.MustNew(env.Limiter(t, closed), only(otherMethod), hook))
		ko, kc := []string{"open#" + sayMethod + "|" + ip1}, []string{"closed#" + otherMethod + "|" + ip1}
		env.Store.SetFail(errors.New("dial tcp 10.0.0.5:6379: connection refused"))
		r.play(env, []gstep{
			{code: codes.OK, want: md{"x-ratelimit-degraded": "1"}, keys: ko},
			{code: codes.OK, want: md{"x-ratelimit-degraded": "1"}, keys: ko},
			{method: otherMethod, code: codes.Unavailable, want: md{"retry-after": "1", "grpc-retry-pushback-ms": "1000"}, retry: time.Second, keys: kc},
		})
		st := call(t, r.conn(peer1), otherMethod).st
		if strings.Contains(st.Message(), "10.0.0.5") || strings.Contains(st.Message(), "refused") {
			t.Errorf("the store's error reached the client: %v", st)
		}
		mu.Lock()
		var se *core.StoreError
		if len(errs) != 4 || !errors.As(errs[0], &se) || se.Mode != core.FailOpen || !errors.As(errs[2], &se) || se.Mode != core.FailClosed {
			t.Errorf("error hook saw %v", errs)
		}
		mu.Unlock()
		env.Store.SetFail(nil)
		r.play(env, []gstep{
			{code: codes.OK, want: xrl(1, 0, time.Minute), keys: ko},
			{code: codes.ResourceExhausted, want: xrl(1, 0, time.Minute).denied(time.Minute), retry: time.Minute, keys: ko},
		})
	}},
	{"NoKeyModes", func(t *testing.T, env *adaptertest.Env) {
		apiKey := header(t, "x-api-key")
		bad := errors.New("token signature invalid")
		badKey := func(keyfuncs.Request) (string, error) { return "", bad }
		var mu sync.Mutex
		var errs []error
		hook := httplimit.WithErrorHook(func(_ context.Context, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
		r := newGRig(t,
			grpclimit.MustNew(env.Limiter(t, pol("fb", core.PerMinute(5))), only(sayMethod), httplimit.WithKey(apiKey)),
			grpclimit.MustNew(env.Limiter(t, pol("skip", core.PerMinute(5))), only(otherMethod), httplimit.WithKey(apiKey), httplimit.WithNoKeySkip()),
			grpclimit.MustNew(env.Limiter(t, pol("deny", core.PerMinute(5))), only(streamMethod), httplimit.WithKey(apiKey), httplimit.WithNoKeyDeny()))
		s := func(p, m, k string) []string { return []string{p + "#" + m + "|" + k} }
		k1 := []string{"x-api-key", "k1"}
		r.play(env, []gstep{
			{md: k1, code: codes.OK, want: xrl(5, 4, 12*time.Second), keys: s("fb", sayMethod, "k1")},
			// no key: the peer IP, under a prefix no API key can take
			{code: codes.OK, want: xrl(5, 4, 12*time.Second), keys: s("fb", sayMethod, "~fb/"+ip1)},
			{md: []string{"x-api-key", ip1}, code: codes.OK, want: xrl(5, 4, 12*time.Second), keys: s("fb", sayMethod, ip1)},
			{method: otherMethod, code: codes.OK},
			{method: otherMethod, md: k1, code: codes.OK, want: xrl(5, 4, 12*time.Second), keys: s("skip", otherMethod, "k1")},
			// a no-key denial: Unauthenticated, no metadata, nothing counted
			{method: streamMethod, code: codes.Unauthenticated},
			{method: streamMethod, md: k1, code: codes.OK, want: xrl(5, 4, 12*time.Second), keys: s("deny", streamMethod, "k1")},
		})
		// invalid key material is reported and falls back; a peer that is
		// not an IP (a Unix socket) finds no key by default
		env2 := adaptertest.NewEnv(t)
		r2 := newGRig(t,
			grpclimit.MustNew(env2.Limiter(t, pol("bad", core.PerMinute(5))), only(sayMethod), httplimit.WithKey(badKey), hook),
			grpclimit.MustNew(env2.Limiter(t, pol("def", core.PerMinute(5))), only(otherMethod)))
		r2.play(env2, []gstep{
			{code: codes.OK, want: xrl(5, 4, 12*time.Second), keys: s("bad", sayMethod, "~fb/"+ip1)},
			{method: otherMethod, peer: "@", code: codes.Unauthenticated},
			{method: otherMethod, peer: "/tmp/app.sock", code: codes.Unauthenticated},
			{method: otherMethod, code: codes.OK, want: xrl(5, 4, 12*time.Second), keys: s("def", otherMethod, ip1)},
		})
		mu.Lock()
		defer mu.Unlock()
		if len(errs) != 1 || !errors.Is(errs[0], bad) {
			t.Errorf("error hook saw %v", errs)
		}
	}},
	{"Metadata", func(t *testing.T, env *adaptertest.Env) {
		// HeaderNone writes no rate-limit metadata (the pushback stays: it
		// is the retry signal); WithResetDelta; the IETF fields as metadata
		a := env.Limiter(t, pol("quiet", core.PerMinute(1)))
		b := env.Limiter(t, pol("api", core.PerMinute(2), core.PerHour(100)))
		r := newGRig(t,
			grpclimit.MustNew(a, only(sayMethod), httplimit.WithHeaders(httplimit.HeaderNone)),
			grpclimit.MustNew(b, only(otherMethod), httplimit.WithHeaders(httplimit.HeaderDefault|httplimit.HeaderIETF), httplimit.WithResetDelta()))
		ka, kb := []string{"quiet#" + sayMethod + "|" + ip1}, []string{"api#" + otherMethod + "|" + ip1}
		pol := `"api-1m";q=2;w=60, "api-1h";q=100;w=3600`
		hd := func(rem, reset int64, rl string) md {
			return md{"x-ratelimit-limit": "2", "x-ratelimit-remaining": strconv.FormatInt(rem, 10), "x-ratelimit-reset": strconv.FormatInt(reset, 10),
				"ratelimit-policy": pol, "ratelimit": rl}
		}
		r.play(env, []gstep{
			{code: codes.OK, keys: ka},
			{code: codes.ResourceExhausted, want: md{"grpc-retry-pushback-ms": "60000"}, retry: time.Minute, keys: ka},
			{method: otherMethod, code: codes.OK, want: hd(1, 30, `"api-1m";r=1;t=30`), keys: kb},
			{method: otherMethod, code: codes.OK, want: hd(0, 60, `"api-1m";r=0;t=60`), keys: kb},
			{method: otherMethod, code: codes.ResourceExhausted, want: hd(0, 60, `"api-1m";r=0;t=30`).denied(30 * time.Second), retry: 30 * time.Second, keys: kb},
		})
	}},
	{"NeverRetry", func(t *testing.T, env *adaptertest.Env) {
		// a cost above the capacity: no RetryInfo, pushback -1, no
		// retry-after
		l := env.Limiter(t, pol("big", core.PerMinute(2)))
		r := newGRig(t, grpclimit.MustNew(l, httplimit.WithCost(func(keyfuncs.Request) int64 { return 5 })))
		r.play(env, []gstep{
			{code: codes.ResourceExhausted, want: xrl(2, 0, 0).with("grpc-retry-pushback-ms", "-1"), retry: noRetry, keys: []string{"big#" + sayMethod + "|" + ip1}},
		})
	}},
	{"ExemptHealthAndReflection", func(t *testing.T, env *adaptertest.Env) {
		l := env.Limiter(t, pol("all", core.PerMinute(1)))
		r := newGRig(t, grpclimit.MustNew(l))
		r.play(env, []gstep{
			{method: healthMethod, code: codes.OK},
			{method: healthMethod, code: codes.OK},
			{code: codes.OK, want: xrl(1, 0, time.Minute), keys: []string{"all#" + sayMethod + "|" + ip1}},
			{method: healthMethod, code: codes.OK},
		})
		for _, m := range []string{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "/grpc.health.v1.Health/Watch"} {
			if !grpclimit.Exempt(m) {
				t.Errorf("%s not exempt", m)
			}
		}
		if grpclimit.Exempt("/grpc.healthz.Health/Check") || grpclimit.Exempt("/grpc.health.v1.HealthX/Check") {
			t.Error("a look-alike service is exempt")
		}
	}},
	{"SpoofedXFFIgnored", func(t *testing.T, env *adaptertest.Env) {
		l := env.Limiter(t, pol("ip", core.PerMinute(2)))
		r := newGRig(t, grpclimit.MustNew(l))
		sc := "ip#" + sayMethod + "|"
		k := []string{sc + ip1}
		r.play(env, []gstep{
			{md: []string{"x-forwarded-for", "1.1.1.1", "x-real-ip", "1.1.1.1"}, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: k},
			{md: []string{"x-forwarded-for", "2.2.2.2, 3.3.3.3", "x-real-ip", "2.2.2.2", "forwarded", "for=2.2.2.2"}, code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: k},
			// rotating the metadata does not mint a new key
			{md: []string{"x-forwarded-for", "4.4.4.4", "true-client-ip", "4.4.4.4"}, code: codes.ResourceExhausted,
				want: xrl(2, 0, 60*time.Second).denied(30 * time.Second), retry: 30 * time.Second, keys: k},
			// one IPv6 /64 is one client, whatever its interface id
			{peer: "[2001:db8:1:2::7]:443", code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{sc + "2001:db8:1:2::/64"}},
			{peer: "[2001:db8:1:2:ffff::8]:443", code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: []string{sc + "2001:db8:1:2::/64"}},
			{peer: "[2001:db8:1:3::7]:443", code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{sc + "2001:db8:1:3::/64"}},
			// an IPv4-mapped peer is the IPv4 client
			{peer: "[::ffff:198.51.100.9]:80", code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{sc + ip2}},
		})
	}},
	{"TrustedProxyXFF", func(t *testing.T, env *adaptertest.Env) {
		// x-forwarded-for names the client only through a resolver given
		// the proxies, and only on a call from one of them
		xff, err := keyfuncs.XForwardedFor("10.0.0.0/8")
		if err != nil {
			t.Fatal(err)
		}
		l := env.Limiter(t, pol("xff", core.PerMinute(2)))
		r := newGRig(t, grpclimit.MustNew(l, httplimit.WithIPKey(xff)))
		sc := "xff#" + sayMethod + "|"
		proxy := "10.1.2.3:5000"
		r.play(env, []gstep{
			{peer: proxy, md: []string{"x-forwarded-for", "198.51.100.1"}, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{sc + "198.51.100.1"}},
			// the rightmost untrusted entry: a spoofed leftmost one is not the client
			{peer: proxy, md: []string{"x-forwarded-for", "6.6.6.6, 198.51.100.1"}, code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: []string{sc + "198.51.100.1"}},
			{peer: proxy, md: []string{"x-forwarded-for", "198.51.100.2"}, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{sc + "198.51.100.2"}},
			{peer: proxy, md: []string{"x-forwarded-for", "2001:db8:9:9::1"}, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{sc + "2001:db8:9:9::/64"}},
			// from a peer that is not a listed proxy the metadata is ignored
			{md: []string{"x-forwarded-for", "198.51.100.3"}, code: codes.OK, want: xrl(2, 1, 30*time.Second), keys: []string{sc + ip1}},
			{md: []string{"x-forwarded-for", "198.51.100.4"}, code: codes.OK, want: xrl(2, 0, 60*time.Second), keys: []string{sc + ip1}},
		})
	}},
	{"SkipHook", func(t *testing.T, env *adaptertest.Env) {
		l := env.Limiter(t, pol("g", core.PerMinute(1)))
		r := newGRig(t, grpclimit.MustNew(l, only(sayMethod), httplimit.WithScope("")))
		k := []string{"g#|" + ip1}
		r.play(env, []gstep{
			{method: otherMethod, code: codes.OK},
			{code: codes.OK, want: xrl(1, 0, time.Minute), keys: k},
			{method: otherMethod, code: codes.OK},
			{code: codes.ResourceExhausted, want: xrl(1, 0, time.Minute).denied(time.Minute), retry: time.Minute, keys: k},
		})
	}},
}

// TestConformance runs the HTTP suite's scenarios that apply to gRPC.
func TestConformance(t *testing.T) {
	for _, sc := range gscenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, adaptertest.NewEnv(t)) })
	}
}
