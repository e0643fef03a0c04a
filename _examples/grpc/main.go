// Command grpc serves a small echo service over gRPC, limited through the
// grpclimit interceptors: the method /limitkit.example.Echo/Say takes and
// returns a google.protobuf.StringValue, so any grpc-go client can call it
// with conn.Invoke and the well-known wrapper types, without generated
// code.
//
//	go run ./_examples/grpc -addr :50051
//
// Limits, per full method (each method has its own quota per client):
// 10 calls per minute per API key (metadata x-api-key; with -jwt-secret, a
// bearer JWT's subject in "authorization" comes first), and 5 per minute
// per peer IP for calls that carry neither. A denial is RESOURCE_EXHAUSTED
// with RetryInfo, QuotaFailure and ErrorInfo details and the
// grpc-retry-pushback-ms trailer; every limited call carries
// x-ratelimit-limit, -remaining and -reset metadata. Health checks and
// reflection are never limited.
//
// Flags: -addr; -redis host:port or redis:// / rediss:// URL (empty: an
// in-process store; instances on one Redis share the quotas); -jwt-secret
// (or LIMITKIT_JWT_SECRET) to key by a verified HS256 token's subject;
// -trusted-proxies CIDRs whose x-forwarded-for metadata names the client
// (default: none, the peer address is the client). Rules files (-rules of
// the HTTP examples) are not wired into grpclimit yet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		log.Fatal(err)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	addr := fs.String("addr", ":50051", "listen address")
	redisURL := fs.String("redis", "", "Redis host:port or redis:// URL (empty: in-process store)")
	jwtSecret := fs.String("jwt-secret", os.Getenv("LIMITKIT_JWT_SECRET"), "HS256 secret: key by the bearer token's subject")
	proxies := fs.String("trusted-proxies", "", "comma-separated CIDRs whose x-forwarded-for is trusted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	store, closeStore, err := openStore(*redisURL)
	if err != nil {
		return err
	}
	defer closeStore()

	ident, err := identity(*jwtSecret)
	if err != nil {
		return err
	}
	ip := keyfuncs.PeerIP()
	if *proxies != "" {
		if ip, err = keyfuncs.XForwardedFor(strings.Split(*proxies, ",")...); err != nil {
			return err
		}
	}
	perKey, err := core.NewLimiter(store, core.Policy{Name: "per-key", Limits: []core.Limit{core.PerMinute(10)}})
	if err != nil {
		return err
	}
	perIP, err := core.NewLimiter(store, core.Policy{Name: "per-ip", Limits: []core.Limit{core.PerMinute(5)}})
	if err != nil {
		return err
	}
	onErr := httplimit.WithErrorHook(func(_ context.Context, err error) { log.Print(err) })
	// calls with an identity are limited by it; the others by their IP
	keyed, err := grpclimit.New(perKey, httplimit.WithKey(ident), httplimit.WithNoKey(httplimit.NoKeySkip), onErr)
	if err != nil {
		return err
	}
	anonymous, err := grpclimit.New(perIP, httplimit.WithIPKey(ip), onErr, httplimit.WithSkip(func(r keyfuncs.Request) bool {
		_, err := ident(r)
		return err == nil
	}))
	if err != nil {
		return err
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(keyed.UnaryServerInterceptor(), anonymous.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(keyed.StreamServerInterceptor(), anonymous.StreamServerInterceptor()),
	)
	srv.RegisterService(&echoService, struct{}{})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Printf("grpc example on %s (store: %s)", ln.Addr(), storeName(*redisURL))
	return srv.Serve(ln)
}

// identity is the key of a call that says who it is: the API key, or
// with a JWT secret first the verified token's subject.
func identity(secret string) (keyfuncs.Func, error) {
	apiKey, err := keyfuncs.APIKey("x-api-key", "")
	if err != nil {
		return nil, err
	}
	if secret == "" {
		return apiKey, nil
	}
	jwt, err := keyfuncs.JWTClaim(keyfuncs.JWTConfig{Methods: []string{"HS256"}, Key: []byte(secret)})
	if err != nil {
		return nil, fmt.Errorf("-jwt-secret: %w", err)
	}
	return keyfuncs.FirstOf(keyfuncs.Tagged("user", jwt), keyfuncs.Tagged("key", apiKey)), nil
}

func openStore(url string) (core.Store, func(), error) {
	if url == "" {
		s, err := memstore.New()
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	}
	client, err := redisstore.NewClient(url)
	if err != nil {
		return nil, nil, err
	}
	s, err := redisstore.New(client)
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return s, func() { _ = client.Close() }, nil
}

func storeName(url string) string {
	if url == "" {
		return "in-process"
	}
	return "redis"
}

// echoService is /limitkit.example.Echo/Say, registered by hand.
var echoService = grpc.ServiceDesc{
	ServiceName: "limitkit.example.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Say", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		say := func(_ context.Context, req any) (any, error) { return req, nil }
		if ic == nil {
			return say(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/limitkit.example.Echo/Say"}, say)
	}}},
}
