package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// startExample runs the example on a free port and returns its address.
func startExample(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go func() { _ = run([]string{"-addr", addr}) }()
	for range 200 { // until it listens
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the example did not start")
	return ""
}

// The example from outside: a grpc-go client gets 10 calls of Say per
// minute per API key and 5 per peer IP without one; a Connect client
// then sees resource_exhausted with RetryInfo and Retry-After; /metrics
// is served and never limited.
func TestExampleQuotas(t *testing.T) {
	addr := startExample(t)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		md []string
		n  int
	}{{[]string{"x-api-key", "alice"}, 10}, {nil, 5}, {[]string{"x-api-key", "bob"}, 10}} {
		for i := 1; i <= c.n+1; i++ {
			var hdr metadata.MD
			err := cc.Invoke(metadata.AppendToOutgoingContext(ctx, c.md...), "/limitkit.example.Echo/Say",
				wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.Header(&hdr), grpc.WaitForReady(true))
			code := status.Code(err)
			if i <= c.n && code != codes.OK || i > c.n && code != codes.ResourceExhausted {
				t.Fatalf("%v call %d: %v", c.md, i, err)
			}
			if i <= c.n && len(hdr.Get("x-ratelimit-remaining")) != 1 {
				t.Fatalf("%v call %d: no x-ratelimit-remaining in %v", c.md, i, hdr)
			}
			if i > c.n {
				var retry *errdetails.RetryInfo
				for _, d := range status.Convert(err).Details() {
					if r, ok := d.(*errdetails.RetryInfo); ok {
						retry = r
					}
				}
				if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
					t.Fatalf("%v denial without RetryInfo: %v", c.md, err)
				}
			}
		}
	}
	// a Connect client over HTTP/1.1, alice's quota spent
	say := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](http.DefaultClient, "http://"+addr+"/limitkit.example.Echo/Say")
	req := connect.NewRequest(wrapperspb.String("hi"))
	req.Header().Set("X-Api-Key", "alice")
	_, err = say.CallUnary(ctx, req)
	var ce *connect.Error
	if !asConnect(err, &ce) || ce.Code() != connect.CodeResourceExhausted || ce.Meta().Get("Retry-After") == "" {
		t.Fatalf("Connect client: %v", err)
	}
	// Shout has its own quota
	shout := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](http.DefaultClient, "http://"+addr+"/limitkit.example.Echo/Shout")
	req = connect.NewRequest(wrapperspb.String("hi"))
	req.Header().Set("X-Api-Key", "alice")
	resp, err := shout.CallUnary(ctx, req)
	if err != nil || resp.Msg.GetValue() != "HI" {
		t.Fatalf("Shout: %v %v", resp, err)
	}
	for range 3 {
		r, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || !strings.Contains(string(b), "limitkit_decisions_total") {
			t.Fatalf("/metrics: %d", r.StatusCode)
		}
	}
}

func asConnect(err error, ce **connect.Error) bool {
	e, ok := err.(*connect.Error)
	*ce = e
	return ok
}
