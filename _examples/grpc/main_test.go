package main

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The example from outside: a grpc-go client over TCP gets 10 calls per
// minute per API key and 5 per peer IP without one; denials carry
// RetryInfo and the pushback trailer.
func TestExampleQuotas(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go func() { _ = run([]string{"-addr", addr}) }()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	say := func(md ...string) (codes.Code, *status.Status, metadata.MD) {
		var tr metadata.MD
		c := metadata.AppendToOutgoingContext(ctx, md...)
		err := cc.Invoke(c, "/limitkit.example.Echo/Say", wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.Trailer(&tr), grpc.WaitForReady(true))
		st := status.Convert(err)
		return st.Code(), st, tr
	}
	for _, c := range []struct {
		md []string
		n  int
	}{{[]string{"x-api-key", "alice"}, 10}, {nil, 5}, {[]string{"x-api-key", "bob"}, 10}} {
		for i := 1; i <= c.n+1; i++ {
			code, st, tr := say(c.md...)
			if i <= c.n && code != codes.OK || i > c.n && code != codes.ResourceExhausted {
				t.Fatalf("%v call %d: %v", c.md, i, st)
			}
			if i > c.n {
				var retry *errdetails.RetryInfo
				for _, d := range st.Details() {
					if r, ok := d.(*errdetails.RetryInfo); ok {
						retry = r
					}
				}
				if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 || len(tr.Get("grpc-retry-pushback-ms")) != 1 {
					t.Fatalf("%v denial: details %v, trailer %v", c.md, st.Details(), tr)
				}
			}
		}
	}
}
