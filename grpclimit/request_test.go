package grpclimit_test

import (
	"github.com/limitkit/limitkit/httplimit"

	"context"
	"net"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

func TestRequestView(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k", "x-forwarded-for", "198.51.100.1", "x-forwarded-for", "198.51.100.2"))
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 40001}})
	r := grpclimit.NewRequest(ctx, sayMethod)
	if r.Method() != "POST" || r.Route() != sayMethod || r.Path() != sayMethod || r.Query("x") != "" {
		t.Fatalf("method %q route %q path %q", r.Method(), r.Route(), r.Path())
	}
	for _, name := range []string{"x-api-key", "X-API-Key", "X-Api-Key"} {
		if got := r.Header(name); got != "k" {
			t.Fatalf("Header(%q) = %q", name, got)
		}
	}
	if got := r.HeaderValues("X-Forwarded-For"); len(got) != 2 {
		t.Fatalf("HeaderValues %q", got)
	}
	if r.Header("absent") != "" || r.HeaderValues("absent") != nil {
		t.Fatal("absent header")
	}
	if r.RemoteAddr() != "203.0.113.7:40001" {
		t.Fatalf("RemoteAddr %q", r.RemoteAddr())
	}
	// the peer's 16-byte IPv4 form is unmapped: the same key as the text path
	if a := r.(httplimit.PeerAddrer).PeerAddr(); !a.Is4() || a.String() != "203.0.113.7" {
		t.Fatalf("PeerAddr %v", a)
	}
	p, err := keyfuncs.PeerIP().Prefix(r)
	if err != nil || p.Addr().String() != "203.0.113.7" {
		t.Fatalf("PeerIP %v %v", p, err)
	}
	// untrusted x-forwarded-for is ignored; a trusted peer's is read
	xff, err := keyfuncs.XForwardedFor("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := xff.Prefix(r); err != nil || p.Addr().String() != "203.0.113.7" {
		t.Fatalf("untrusted peer's XFF used: %v %v", p, err)
	}
	trusted := peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 1}})
	if p, err := xff.Prefix(grpclimit.NewRequest(trusted, sayMethod)); err != nil || p.Addr().String() != "198.51.100.2" {
		t.Fatalf("trusted proxy's XFF: %v %v", p, err)
	}
	if (grpclimit.NewRequest(context.Background(), sayMethod)).RemoteAddr() != "" {
		t.Fatal("no peer")
	}
}
