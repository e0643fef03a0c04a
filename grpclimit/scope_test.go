package grpclimit_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/grpclimit"
)

// proxyClient serves the test services (health Check registered) behind
// an interceptor limiting each client to 5 calls a minute, with an
// unknown-service handler (a proxy's: it echoes one message) for every
// other method; it returns a client connected as 203.0.113.7.
func proxyClient(t *testing.T) *grpc.ClientConn {
	t.Helper()
	ic := grpclimit.MustNew(newLimiter(t, 5, core.NewManualClock(t0)))
	proxy := grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
		return ss.SendMsg(in)
	})
	return bufServer(t, []grpc.ServerOption{grpc.UnaryInterceptor(ic.UnaryServerInterceptor()),
		grpc.StreamInterceptor(ic.StreamServerInterceptor()), proxy}, "203.0.113.7")[0]
}

// Issue 40: behind grpc.UnknownServiceHandler the client names the
// method. 50 invented method names share one quota (UnregisteredRoute):
// 5 calls pass against a limit of 5, not 250. A registered method keeps
// its own quota.
func TestUnregisteredMethodsShareOneScope(t *testing.T) {
	cc := proxyClient(t)
	ok := 0
	for i := 0; i < 50; i++ {
		m := fmt.Sprintf("/invented.S%d/M%d", i, i)
		for j := 0; j < 5; j++ {
			switch r := call(t, cc, m); r.code {
			case codes.OK:
				ok++
			case codes.ResourceExhausted:
			default:
				t.Fatalf("%s: %v", m, r.st)
			}
		}
	}
	if ok != 5 {
		t.Fatalf("%d of 250 calls to 50 invented methods passed, want 5 (the limit, one scope for every unregistered method)", ok)
	}
	if r := call(t, cc, sayMethod); r.code != codes.OK {
		t.Fatalf("a registered method after the unregistered ones: %v, want OK (its own scope)", r.st)
	}
}

// Issue 40: only the registered health and reflection methods are
// exempt, matched exactly. A name under those services that the server
// does not serve (sent on to the unknown-service handler) is limited: the
// sixth call is denied. The registered health Check stays exempt.
func TestExemptionsMatchRegisteredMethodsExactly(t *testing.T) {
	for _, m := range []string{
		"/grpc.health.v1.Health/Nope",
		"/grpc.reflection.x/Info",                                   // "/grpc.reflection.x" itself is no method name: grpc-go answers Unimplemented before any interceptor
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", // an exempt name, not registered here
		"/grpc.health.v1.Health/Watch",                              // likewise
	} {
		t.Run(m, func(t *testing.T) {
			cc := proxyClient(t)
			for i := 1; i <= 6; i++ {
				want := codes.OK
				if i == 6 {
					want = codes.ResourceExhausted
				}
				if r := call(t, cc, m); r.code != want {
					t.Fatalf("call %d: %v, want %v", i, r.st, want)
				}
			}
		})
	}
	cc := proxyClient(t)
	for i := 1; i <= 10; i++ {
		if r := call(t, cc, healthMethod); r.code != codes.OK {
			t.Fatalf("registered health check %d: %v, want OK (exempt)", i, r.st)
		}
	}
	for _, m := range []string{"/grpc.health.v1.Health/Nope", "/grpc.reflection.x", "/grpc.health.v1.Health/", "/grpc.health.v1.Health/Check/x"} {
		if grpclimit.Exempt(m) {
			t.Errorf("Exempt(%q) = true, want false (exact names only)", m)
		}
	}
}
