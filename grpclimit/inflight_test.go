package grpclimit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
)

// TestConcurrencyGRPC: with httplimit.WithConcurrency (1 in flight per
// API key), a unary call or a stream holds its slot until its handler
// returns: a second call meanwhile is ResourceExhausted; once the first
// ends (its client cancelled) the next is admitted, and a panicking
// handler gives its slot back too.
func TestConcurrencyGRPC(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "unary"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			store := memstore.MustNew()
			defer store.Close()
			c, err := core.NewConcurrency(store, core.ConcurrencyPolicy{Name: "calls", Max: 1})
			if err != nil {
				t.Fatal(err)
			}
			ic, err := grpclimit.New(newLimiter(t, 1000, core.NewManualClock(t0)), httplimit.WithKey(apiKey(t)), httplimit.WithConcurrency(c))
			if err != nil {
				t.Fatal(err)
			}
			r := newFSRig(t, ic)
			ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "alice"))
			done := make(chan error, 1)
			go func() {
				if !stream {
					done <- r.cc.Invoke(ctx, fsUnary, wrapperspb.String(fsGone), new(wrapperspb.StringValue))
					return
				}
				cs, err := r.cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, fsStream)
				if err == nil {
					if err = cs.SendMsg(wrapperspb.String(fsGone)); err == nil {
						_ = cs.CloseSend()
						err = cs.RecvMsg(new(wrapperspb.StringValue))
					}
				}
				done <- err
			}()
			<-r.entered // the first call's handler runs
			if got := r.call(t, stream, fsGood); got != codes.ResourceExhausted {
				t.Fatalf("a second call while the first runs: %v, want ResourceExhausted", got)
			}
			cancel()
			if err := <-done; status.Code(err) != codes.Canceled {
				t.Fatalf("the first call: %v", err)
			}
			<-r.settled
			if got := r.call(t, stream, fsPanic); got != codes.Internal {
				t.Fatalf("after the first ended: %v, want the panic's Internal", got)
			}
			if got := r.call(t, stream, fsGood); got != codes.OK {
				t.Fatalf("after a panic: %v, want OK (the slot given back)", got)
			}
		})
	}
}
