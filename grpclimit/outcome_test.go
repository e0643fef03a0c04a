package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

const (
	loginMethod  = "/limitkit.example.Auth/Login"
	loginStream  = "/limitkit.example.Auth/LoginStream"
	passGood     = "good"    // OK
	passBad      = "bad"     // Unauthenticated
	passMissing  = "missing" // NotFound
	passPlainErr = "plain"   // a non-status error: Unknown
	passCanceled = "cancel"  // context.Canceled: Canceled
)

// authRig serves a login-like service: Login answers by the password in
// its request (see the pass constants); its handler counts its runs and,
// when hold is set, reports each entry on entered and blocks until
// release is closed.
type authRig struct {
	cc      *grpc.ClientConn
	runs    atomic.Int64
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func answer(pass string) error {
	switch pass {
	case passGood:
		return nil
	case passBad:
		return status.Error(codes.Unauthenticated, "wrong password")
	case passMissing:
		return status.Error(codes.NotFound, "no such user")
	case passCanceled:
		return context.Canceled
	}
	return errors.New("plain error")
}

func newAuthRig(t *testing.T, ic *grpclimit.Interceptor) *authRig {
	t.Helper()
	r := &authRig{entered: make(chan struct{}, 1000), release: make(chan struct{})}
	s := grpc.NewServer(grpc.UnaryInterceptor(ic.UnaryServerInterceptor()), grpc.StreamInterceptor(ic.StreamServerInterceptor()))
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "limitkit.example.Auth",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Login", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				r.runs.Add(1)
				if r.hold.Load() {
					r.entered <- struct{}{}
					<-r.release
				}
				if err := answer(req.(*wrapperspb.StringValue).GetValue()); err != nil {
					return nil, err
				}
				return req, nil
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: loginMethod}, h)
		}}},
		Streams: []grpc.StreamDesc{{StreamName: "LoginStream", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			r.runs.Add(1)
			in := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			if err := answer(in.GetValue()); err != nil {
				return err
			}
			return ss.SendMsg(in)
		}}},
	}, struct{}{})
	lis := bufconn.Listen(1 << 20)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	r.cc = cc
	return r
}

// login calls Login as user with pass and returns its status and trailer.
func (r *authRig) login(user, pass string) (*status.Status, metadata.MD) {
	var tr metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", user)
	err := r.cc.Invoke(ctx, loginMethod, wrapperspb.String(pass), new(wrapperspb.StringValue), grpc.Trailer(&tr))
	return status.Convert(err), tr
}

// loginStream opens LoginStream as user, sends pass and returns the
// stream's status.
func (r *authRig) loginStream(t *testing.T, user, pass string) codes.Code {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", user)
	cs, err := r.cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, loginStream)
	if err != nil {
		return status.Code(err)
	}
	if err := cs.SendMsg(wrapperspb.String(pass)); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return status.Code(cs.RecvMsg(new(wrapperspb.StringValue)))
}

func outcomeInterceptor(t *testing.T, n int64, clock core.Clock, o httplimit.Outcome) *grpclimit.Interceptor {
	t.Helper()
	ic, err := grpclimit.New(newLimiter(t, n, clock), httplimit.WithKey(apiKey(t)), grpclimit.WithOutcome(o))
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// Ten failed logins (Unauthenticated) per key are allowed, the eleventh
// call is denied before the handler with ResourceExhausted, its details
// and the pushback; successful calls and codes Count does not accept are
// never counted; another key has its own count.
func TestOutcomeCountsFailedLogins(t *testing.T) {
	clock := core.NewManualClock(t0)
	r := newAuthRig(t, outcomeInterceptor(t, 10, clock, httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated)}))
	for i := 0; i < 10; i++ {
		for j := 0; j < 3; j++ { // successes and other codes in between count for nothing
			if st, _ := r.login("alice", passGood); st.Code() != codes.OK {
				t.Fatalf("success %d.%d: %v", i, j, st)
			}
			if st, _ := r.login("alice", passMissing); st.Code() != codes.NotFound {
				t.Fatalf("not found %d.%d: %v", i, j, st)
			}
		}
		if st, _ := r.login("alice", passBad); st.Code() != codes.Unauthenticated {
			t.Fatalf("failed login %d: %v, want Unauthenticated (admitted)", i+1, st)
		}
	}
	runs := r.runs.Load()
	for _, pass := range []string{passBad, passGood} {
		st, tr := r.login("alice", pass)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("%s login after 10 failures: %v, want ResourceExhausted", pass, st)
		}
		var retry *errdetails.RetryInfo
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				retry = ri
			}
		}
		if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
			t.Fatalf("denial details %v: want a RetryInfo with a delay", st.Details())
		}
		if len(tr.Get("grpc-retry-pushback-ms")) != 1 || tr.Get("x-ratelimit-remaining")[0] != "0" {
			t.Fatalf("denial trailer %v: want pushback and remaining 0", tr)
		}
	}
	if got := r.runs.Load(); got != runs {
		t.Fatalf("the handler ran %d times for denied calls; a client over its limit is denied before it", got-runs)
	}
	if st, _ := r.login("bob", passBad); st.Code() != codes.Unauthenticated {
		t.Fatalf("another key: %v, want Unauthenticated (admitted)", st)
	}
}

// A plain error counts as Unknown and a context error as grpc-go maps it
// (context.Canceled: Canceled), the codes the client sees.
func TestOutcomeCodeOfHandlerError(t *testing.T) {
	for _, c := range []struct {
		count     codes.Code
		counted   string
		uncounted []string
	}{
		{codes.Canceled, passCanceled, []string{passPlainErr, passBad, passGood}},
		{codes.Unknown, passPlainErr, []string{passCanceled, passBad, passGood}},
	} {
		clock := core.NewManualClock(t0)
		r := newAuthRig(t, outcomeInterceptor(t, 1, clock, httplimit.Outcome{Count: grpclimit.CodeIn(c.count)}))
		for i := 0; i < 3; i++ {
			for _, pass := range c.uncounted {
				if st, _ := r.login("u", pass); st.Code() == codes.ResourceExhausted {
					t.Fatalf("counting %v: %s login %d denied: it was counted", c.count, pass, i)
				}
			}
		}
		if st, _ := r.login("u", c.counted); st.Code() != c.count {
			t.Fatalf("%s login: %v, want %v", c.counted, st, c.count)
		}
		if st, _ := r.login("u", passGood); st.Code() != codes.ResourceExhausted {
			t.Fatalf("counting %v: after a %s login, %v: want ResourceExhausted", c.count, c.counted, st)
		}
	}
}

// CodeNotOK counts every code but OK.
func TestOutcomeCodeNotOK(t *testing.T) {
	clock := core.NewManualClock(t0)
	r := newAuthRig(t, outcomeInterceptor(t, 2, clock, httplimit.Outcome{Count: grpclimit.CodeNotOK}))
	for i := 0; i < 5; i++ {
		if st, _ := r.login("u", passGood); st.Code() != codes.OK {
			t.Fatalf("success %d: %v", i, st)
		}
	}
	r.login("u", passMissing)
	r.login("u", passBad)
	if st, _ := r.login("u", passGood); st.Code() != codes.ResourceExhausted {
		t.Fatalf("after NotFound and Unauthenticated: %v, want ResourceExhausted", st)
	}
}

// With ResetOnSuccess an OK call clears the key's failures; a code that
// does not count but is not OK clears nothing; without it, a success
// leaves the failures counted.
func TestOutcomeResetOnSuccess(t *testing.T) {
	for _, reset := range []bool{true, false} {
		clock := core.NewManualClock(t0)
		r := newAuthRig(t, outcomeInterceptor(t, 10, clock, httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated), ResetOnSuccess: reset}))
		for i := 0; i < 9; i++ {
			r.login("alice", passBad)
		}
		if st, _ := r.login("alice", passMissing); st.Code() != codes.NotFound {
			t.Fatal(st)
		}
		if st, _ := r.login("alice", passGood); st.Code() != codes.OK {
			t.Fatalf("reset %v: success after 9 failures: %v", reset, st)
		}
		admitted := 0
		for i := 0; i < 12; i++ {
			if st, _ := r.login("alice", passBad); st.Code() == codes.Unauthenticated {
				admitted++
			}
		}
		want := 1 // the count stayed at 9
		if reset {
			want = 10 // cleared by the success, not by NotFound
		}
		if admitted != want {
			t.Fatalf("ResetOnSuccess %v: %d failures admitted after the success, want %d", reset, admitted, want)
		}
	}
}

// ChargeFirst is exact under concurrency: of many concurrent failed
// logins on one key, held in their handler until every call is decided,
// exactly the limit is admitted; after they answer they stay charged.
// Successful calls are refunded when they end.
func TestOutcomeChargeFirstExact(t *testing.T) {
	const limit, callers = 10, 40
	for _, pass := range []string{passBad, passGood} {
		clock := core.NewManualClock(t0)
		r := newAuthRig(t, outcomeInterceptor(t, limit, clock, httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated), ChargeFirst: true}))
		r.hold.Store(true)
		var denied atomic.Int64
		deniedCh := make(chan struct{}, callers)
		var wg sync.WaitGroup
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, _ := r.login("alice", pass)
				if st.Code() == codes.ResourceExhausted {
					denied.Add(1)
					deniedCh <- struct{}{}
				}
			}()
		}
		// every call is decided: in its handler, or denied
		for decided := 0; decided < callers; decided++ {
			select {
			case <-r.entered:
			case <-deniedCh:
			}
		}
		if got := r.runs.Load(); got != limit {
			t.Fatalf("%s: %d calls admitted at once, want exactly %d", pass, got, limit)
		}
		close(r.release)
		wg.Wait()
		if denied.Load() != callers-limit {
			t.Fatalf("%s: %d denied, want %d", pass, denied.Load(), callers-limit)
		}
		r.hold.Store(false)
		admitted := 0
		for i := 0; i < limit+2; i++ {
			if st, _ := r.login("alice", passBad); st.Code() == codes.Unauthenticated {
				admitted++
			}
		}
		want := 0 // the failures stay charged
		if pass == passGood {
			want = limit // the successes were refunded
		}
		if admitted != want {
			t.Fatalf("after %d %s logins: %d failures admitted, want %d", limit, pass, admitted, want)
		}
	}
}

// A stream is counted by the code its handler ends with: failed streams
// are charged, successful ones are not, and a client over its limit is
// denied at open.
func TestOutcomeStream(t *testing.T) {
	clock := core.NewManualClock(t0)
	r := newAuthRig(t, outcomeInterceptor(t, 3, clock, httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated)}))
	for i := 0; i < 5; i++ {
		if c := r.loginStream(t, "alice", passGood); c != codes.OK {
			t.Fatalf("good stream %d: %v", i, c)
		}
	}
	for i := 0; i < 3; i++ {
		if c := r.loginStream(t, "alice", passBad); c != codes.Unauthenticated {
			t.Fatalf("failed stream %d: %v, want Unauthenticated (admitted)", i, c)
		}
	}
	runs := r.runs.Load()
	if c := r.loginStream(t, "alice", passGood); c != codes.ResourceExhausted {
		t.Fatalf("stream after 3 failures: %v, want ResourceExhausted", c)
	}
	if r.runs.Load() != runs {
		t.Fatal("the denied stream's handler ran")
	}
}

// Counting by outcome is grpclimit.WithOutcome's: a nil Count fails, the
// option is refused by other adapters, and a message policy counted by
// outcome makes the stream interceptor panic.
func TestOutcomeMistakes(t *testing.T) {
	lim := func() *core.Limiter { return newLimiter(t, 1, core.NewManualClock(t0)) }
	if _, err := grpclimit.New(lim(), grpclimit.WithOutcome(httplimit.Outcome{})); err == nil || !strings.Contains(err.Error(), "grpclimit.WithOutcome") {
		t.Fatalf("nil Count: %v", err)
	}
	opt := grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeNotOK})
	if _, err := httplimit.NewAdapterEngine(httplimit.Adapter{Name: "nethttp"}, lim(), opt); err == nil || !strings.Contains(err.Error(), "grpclimit") {
		t.Fatalf("another adapter given grpclimit.WithOutcome: %v", err)
	}
	if _, err := grpclimit.New(lim(), opt); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "PerMessage") {
			t.Fatalf("PerMessage with an outcome policy: panic %v", p)
		}
	}()
	grpclimit.MustNew(lim()).StreamServerInterceptor(grpclimit.PerMessage(grpclimit.MustNew(lim(), opt)))
}

// TestOutcomeGivenTwoWays: grpclimit.WithOutcome and httplimit.WithOutcome
// (a rules file's count:) together are a construction error in either
// order, naming both; before, the last one's Count applied, and after a
// grpclimit.WithOutcome an httplimit.WithOutcome's Count saw gRPC
// numbering instead of HTTP statuses.
func TestOutcomeGivenTwoWays(t *testing.T) {
	l := newLimiter(t, 1, core.NewManualClock(t0))
	byCode := grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated)})
	byStatus := httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401)})
	const want = "grpclimit: grpclimit.WithOutcome and httplimit.WithOutcome both set counting by outcome, their Counts seeing different numbers " +
		"(httplimit.WithOutcome's, also an HTTP adapter's WithOutcome and a rules file's count:, sees HTTP statuses): give one of the two"
	for name, opts := range map[string][]httplimit.Option{
		"grpclimit first": {byCode, byStatus},
		"httplimit first": {byStatus, byCode},
	} {
		if _, err := grpclimit.New(l, opts...); err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %q", name, err, want)
		}
	}
	for _, opts := range [][]httplimit.Option{{byCode}, {byStatus}, {byCode, byCode}, {byStatus, byStatus}} {
		if _, err := grpclimit.New(l, opts...); err != nil {
			t.Errorf("one way of counting (%d options): %v", len(opts), err)
		}
	}
}

// WithTiers and WithOverrides pass through: the tier (metadata x-plan)
// picks the limiter, an override's key gets its own, each with its own
// quota, and the metadata describes the chosen policy.
func TestTiersAndOverrides(t *testing.T) {
	clock := core.NewManualClock(t0)
	lim := func(name string, n int64) *core.Limiter {
		st := memstore.MustNew()
		t.Cleanup(func() { st.Close() })
		return core.MustNewLimiter(st, core.Policy{Name: name, Limits: []core.Limit{core.PerMinute(n)}}, core.WithClock(clock))
	}
	plan, err := keyfuncs.Header("x-plan")
	if err != nil {
		t.Fatal(err)
	}
	rawKey, err := keyfuncs.Header("x-api-key") // the raw key, which overrides name
	if err != nil {
		t.Fatal(err)
	}
	ic := grpclimit.MustNew(lim("free", 2), httplimit.WithKey(rawKey),
		httplimit.WithTiers(plan, map[string]*core.Limiter{"pro": lim("pro", 4)}),
		httplimit.WithOverrides(map[string]*core.Limiter{"vip": lim("vip", 6)}))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	for _, c := range []struct {
		key, plan string
		want      int
	}{{"a", "", 2}, {"b", "pro", 4}, {"c", "gold", 2}, {"vip", "", 6}, {"vip", "pro", 6}} {
		md := []string{"x-api-key", c.key}
		if c.plan != "" {
			md = append(md, "x-plan", c.plan)
		}
		admitted := 0
		for i := 0; i < c.want+2; i++ {
			r := call(t, cc, sayMethod, md...)
			switch r.code {
			case codes.OK:
				admitted++
				if lim := r.header.Get("x-ratelimit-limit"); len(lim) != 1 || lim[0] != strconv.Itoa(c.want) {
					t.Fatalf("key %s plan %q: x-ratelimit-limit %v, want %d", c.key, c.plan, lim, c.want)
				}
			case codes.ResourceExhausted:
			default:
				t.Fatal(r.st)
			}
		}
		if admitted != c.want {
			t.Fatalf("key %s plan %q: %d admitted, want %d", c.key, c.plan, admitted, c.want)
		}
		clock.Advance(time.Minute)
	}
}

// httplimit.WithOutcome (what a rules file's count: builds) counts by the
// code's HTTP status: StatusIn(401) counts Unauthenticated, not NotFound
// or a plain error (500); a Count of status >= 500 counts a plain error, not
// Unauthenticated; OK is the success ResetOnSuccess clears on.
func TestOutcomeHTTPStatuses(t *testing.T) {
	for _, c := range []struct {
		count     func(int) bool
		counted   string
		uncounted []string
	}{
		{httplimit.StatusIn(401), passBad, []string{passMissing, passPlainErr, passGood}},
		{func(s int) bool { return s >= 500 }, passPlainErr, []string{passBad, passMissing, passCanceled, passGood}},
	} {
		clock := core.NewManualClock(t0)
		ic, err := grpclimit.New(newLimiter(t, 2, clock), httplimit.WithKey(apiKey(t)),
			httplimit.WithOutcome(httplimit.Outcome{Count: c.count, ResetOnSuccess: true}))
		if err != nil {
			t.Fatal(err)
		}
		r := newAuthRig(t, ic)
		for i := 0; i < 3; i++ {
			for _, pass := range c.uncounted {
				if st, _ := r.login("u", pass); st.Code() == codes.ResourceExhausted {
					t.Fatalf("%s login %d denied: it was counted", pass, i)
				}
			}
		}
		r.login("u", c.counted)
		r.login("u", passGood) // resets
		r.login("u", c.counted)
		r.login("u", c.counted)
		if st, _ := r.login("u", passGood); st.Code() != codes.ResourceExhausted {
			t.Fatalf("after 2 %s logins: %v, want ResourceExhausted", c.counted, st)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	want := map[codes.Code]int{codes.OK: 200, codes.Canceled: 499, codes.Unknown: 500, codes.InvalidArgument: 400,
		codes.DeadlineExceeded: 504, codes.NotFound: 404, codes.AlreadyExists: 409, codes.PermissionDenied: 403,
		codes.ResourceExhausted: 429, codes.FailedPrecondition: 400, codes.Aborted: 409, codes.OutOfRange: 400,
		codes.Unimplemented: 501, codes.Internal: 500, codes.Unavailable: 503, codes.DataLoss: 500,
		codes.Unauthenticated: 401, codes.Code(99): 500}
	for c, s := range want {
		if got := grpclimit.HTTPStatus(c); got != s {
			t.Errorf("HTTPStatus(%v) = %d, want %d", c, got, s)
		}
	}
}

// TestOutcomeCountSeesCodeNumbers pins WithOutcome's numbering, which a
// Count of one's own (not CodeIn or CodeNotOK) reads: 200 for OK, 1000 +
// the code for any other.
func TestOutcomeCountSeesCodeNumbers(t *testing.T) {
	clock := core.NewManualClock(t0)
	var mu sync.Mutex
	var seen []int
	count := func(s int) bool {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
		return false
	}
	r := newAuthRig(t, outcomeInterceptor(t, 5, clock, httplimit.Outcome{Count: count}))
	r.login("u", passGood)
	r.login("u", passBad)
	r.login("u", passMissing)
	mu.Lock()
	defer mu.Unlock()
	want := []int{200, 1000 + int(codes.Unauthenticated), 1000 + int(codes.NotFound)}
	if !slices.Equal(seen, want) {
		t.Fatalf("Count saw %v, want %v", seen, want)
	}
}
