package grpclimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
)

// chat is one Chat stream as an API key: send sends a message and
// reports the echo's status (OK when it came back).
type chat struct {
	cs     grpc.ClientStream
	cancel context.CancelFunc
}

func openChat(t *testing.T, cc *grpc.ClientConn, key string) *chat {
	t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key))
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, streamMethod)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return &chat{cs, cancel}
}

func (c *chat) send(t *testing.T) *status.Status {
	t.Helper()
	if err := c.cs.SendMsg(wrapperspb.String("m")); err != nil {
		t.Fatalf("send: %v", err) // io.EOF would mean the stream ended before the message
	}
	out := new(wrapperspb.StringValue)
	return status.Convert(c.cs.RecvMsg(out))
}

// Issue 27: with PerMessage, each message a client sends on an admitted
// stream is charged to a policy of its own (per key, per method, across
// the key's streams); a denied message ends the stream with
// ResourceExhausted, its details and the pushback trailer, although the
// test's handler returns nil on a receive error.
func TestPerMessageLimit(t *testing.T) {
	clock := core.NewManualClock(t0)
	streams := grpclimit.MustNew(newLimiter(t, 10, clock), httplimit.WithKey(apiKey(t)))
	msgLim := newLimiter(t, 3, clock) // 3 messages a minute: one every 20 s
	messages := grpclimit.MustNew(msgLim, httplimit.WithKey(apiKey(t)))
	cc := bufServer(t, []grpc.ServerOption{
		grpc.UnaryInterceptor(streams.UnaryServerInterceptor()),
		grpc.StreamInterceptor(streams.StreamServerInterceptor(grpclimit.PerMessage(messages))),
	}, "203.0.113.7")[0]

	c := openChat(t, cc, "alice")
	for i := 1; i <= 3; i++ {
		if st := c.send(t); st.Code() != codes.OK {
			t.Fatalf("message %d: %v", i, st)
		}
	}
	// the stream's own admission wrote the stream policy's metadata
	hdr, err := c.cs.Header()
	if err != nil || len(hdr.Get("x-ratelimit-limit")) != 1 || hdr.Get("x-ratelimit-limit")[0] != "10" {
		t.Fatalf("stream header %v, %v", hdr, err)
	}
	st := c.send(t)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("4th message: %v, want ResourceExhausted", st)
	}
	var retry *errdetails.RetryInfo
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		switch v := d.(type) {
		case *errdetails.RetryInfo:
			retry = v
		case *errdetails.ErrorInfo:
			info = v
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() != 20*time.Second || info == nil || info.Metadata["policy"] != "echo" {
		t.Fatalf("denial details %v", st.Details())
	}
	tr := c.cs.Trailer()
	if got := tr.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != strconv.Itoa(20000) {
		t.Fatalf("trailer %v", tr)
	}
	if got := tr.Get("x-ratelimit-remaining"); len(got) != 1 || got[0] != "0" {
		t.Fatalf("trailer %v", tr)
	}

	// the message quota is the key's across streams: a new stream is
	// admitted (its own policy) and its first message denied
	c2 := openChat(t, cc, "alice")
	if st := c2.send(t); st.Code() != codes.ResourceExhausted {
		t.Fatalf("first message of a second stream: %v", st)
	}
	// another key has its own message quota
	if st := openChat(t, cc, "bob").send(t); st.Code() != codes.OK {
		t.Fatalf("bob: %v", st)
	}
	// 20 s later one more message of alice's passes
	clock.Advance(20 * time.Second)
	c3 := openChat(t, cc, "alice")
	if st := c3.send(t); st.Code() != codes.OK {
		t.Fatalf("after the wait: %v", st)
	}
	if st := c3.send(t); st.Code() != codes.ResourceExhausted {
		t.Fatalf("second message after the wait: %v", st)
	}
	// the unary method is charged to neither message policy
	if r := call(t, cc, sayMethod, "x-api-key", "alice"); r.code != codes.OK {
		t.Fatalf("unary: %v", r.st)
	}
}

// Without PerMessage, messages are not charged (the default is
// unchanged); with a nil PerMessage neither.
func TestPerMessageOff(t *testing.T) {
	clock := core.NewManualClock(t0)
	streams := grpclimit.MustNew(newLimiter(t, 10, clock), httplimit.WithKey(apiKey(t)))
	cc := bufServer(t, []grpc.ServerOption{
		grpc.StreamInterceptor(streams.StreamServerInterceptor(grpclimit.PerMessage(nil))),
	}, "203.0.113.7")[0]
	c := openChat(t, cc, "alice")
	for i := 1; i <= 20; i++ {
		if st := c.send(t); st.Code() != codes.OK {
			t.Fatalf("message %d: %v", i, st)
		}
	}
}
