package grpclimit_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// TestRefusedKeyIsInvalidArgument: a key function's keyfuncs.Refusal
// (key material the limiter cannot read) answers InvalidArgument, never
// keyed by the peer fallback, which admits the same call without it.
func TestRefusedKeyIsInvalidArgument(t *testing.T) {
	clock := core.NewManualClock(t0)
	refuse := func(r keyfuncs.Request) (string, error) {
		if r.Header("x-refuse") != "" {
			return "", &keyfuncs.Refusal{Status: 400, Detail: "unreadable"}
		}
		return "", keyfuncs.ErrNoKey
	}
	ic := grpclimit.MustNew(newLimiter(t, 5, clock), httplimit.WithKey(refuse))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	if r := call(t, cc, sayMethod, "x-refuse", "1"); r.code != codes.InvalidArgument {
		t.Fatalf("refused key: %v, want InvalidArgument", r.st)
	}
	if r := call(t, cc, sayMethod); r.code != codes.OK {
		t.Fatalf("no key, the peer fallback: %v", r.st)
	}
}
