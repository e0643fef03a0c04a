// Package connectlimit is the Connect (connectrpc.com/connect) adapter of
// limitkit: an interceptor that limits the calls a Connect handler
// serves, over the Connect, gRPC and gRPC-Web protocols, on HTTP/1.1 and
// HTTP/2, with the same limiters, keys and options as the HTTP adapters.
//
//	store := memstore.MustNew()
//	api := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(100)}})
//	limit, err := connectlimit.New(api, httplimit.WithKey(keyfuncs.Header("X-Api-Key")))
//	if err != nil { ... }
//	path, handler := examplev1connect.NewEchoHandler(svc, connect.WithInterceptors(limit))
//
// The procedure is the scope: each procedure has its own quota per
// client. See [Interceptor] for the denial (connect.CodeResourceExhausted
// with RetryInfo and Retry-After), the headers and counting by outcome.
// Package grpclimit is the same for grpc-go servers.
package connectlimit
