package grpclimit_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Per method, 10 calls a minute per API key (metadata x-api-key); calls
// without one are limited by their peer IP.
func ExampleNew() {
	store := memstore.MustNew()
	defer store.Close()
	limiter := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.Per(10, time.Minute)}})
	apiKey, err := keyfuncs.APIKey("x-api-key", "")
	if err != nil {
		panic(err)
	}
	ic, err := grpclimit.New(limiter, httplimit.WithKey(apiKey))
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(ic.UnaryServerInterceptor()),
		grpc.StreamInterceptor(ic.StreamServerInterceptor()),
	)
	defer srv.Stop()
	fmt.Println("serving")
	// Output: serving
}

// Streams are admitted at open by one policy and each message the client
// sends on them is charged to another: here 10 streams and 100 messages a
// minute per API key, per method.
func ExamplePerMessage() {
	store := memstore.MustNew()
	defer store.Close()
	apiKey, err := keyfuncs.APIKey("x-api-key", "")
	if err != nil {
		panic(err)
	}
	streams := grpclimit.MustNew(core.MustNewLimiter(store, core.Policy{Name: "streams", Limits: []core.Limit{core.PerMinute(10)}}), httplimit.WithKey(apiKey))
	messages := grpclimit.MustNew(core.MustNewLimiter(store, core.Policy{Name: "messages", Limits: []core.Limit{core.PerMinute(100)}}), httplimit.WithKey(apiKey))
	srv := grpc.NewServer(grpc.StreamInterceptor(streams.StreamServerInterceptor(grpclimit.PerMessage(messages))))
	defer srv.Stop()
	fmt.Println("serving")
	// Output: serving
}

// A client without a grpc-go retry policy waits the delay a denial asks
// for (RetryInfo, else grpc-retry-pushback-ms) and retries, at most 3
// attempts, never past the call's deadline.
func ExampleUnaryClientInterceptor() {
	cc, err := grpc.NewClient("localhost:50051",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(grpclimit.ClientConfig{MaxAttempts: 3, MaxWait: 10 * time.Second})),
		grpc.WithStreamInterceptor(grpclimit.StreamClientInterceptor(grpclimit.ClientConfig{})))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	d, ok := grpclimit.RetryDelay(status.Error(codes.ResourceExhausted, "slow down"), metadata.Pairs("grpc-retry-pushback-ms", "1500"))
	fmt.Println(d, ok)
	// Output: 1.5s true
}

// Login throttling: 3 failed logins (Unauthenticated) a minute per API
// key; successful logins count for nothing and clear the failures. The
// interceptor is called directly here, as grpc-go calls it.
func ExampleWithOutcome() {
	store := memstore.MustNew()
	defer store.Close()
	limiter := core.MustNewLimiter(store, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(3)}})
	apiKey, err := keyfuncs.APIKey("x-api-key", "")
	if err != nil {
		panic(err)
	}
	ic := grpclimit.MustNew(limiter, httplimit.WithKey(apiKey),
		grpclimit.WithOutcome(httplimit.Outcome{Count: grpclimit.CodeIn(codes.Unauthenticated), ResetOnSuccess: true}))
	unary := ic.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/auth.Auth/Login"}
	login := func(password string) codes.Code {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k-1"))
		_, err := unary(ctx, password, info, func(ctx context.Context, req any) (any, error) {
			if req != "secret" {
				return nil, status.Error(codes.Unauthenticated, "wrong password")
			}
			return "welcome", nil
		})
		return status.Code(err)
	}
	fmt.Println(login("guess1"), login("guess2"), login("secret"), login("guess3"))
	fmt.Println(login("guess4"), login("guess5"), login("guess6"), login("secret"))
	// Output:
	// Unauthenticated Unauthenticated OK Unauthenticated
	// Unauthenticated Unauthenticated ResourceExhausted ResourceExhausted
}
