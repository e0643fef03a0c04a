package grpclimit

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// request is the view [NewRequest] describes; the interceptors keep one
// on the stack per call.
type request struct {
	ctx        context.Context
	fullMethod string
	peer       net.Addr
	peerRead   bool // peer holds peer.FromContext's answer: read on first use
	// unregistered: the server did not register fullMethod (Route is
	// unregisteredRoute); a bool, not a route string, keeps the view in
	// the 64-byte size class
	unregistered bool
}

var (
	_ keyfuncs.Request     = (*request)(nil)
	_ httplimit.Request    = (*request)(nil)
	_ httplimit.PeerAddrer = (*request)(nil)
	_ httplimit.KeyParter  = (*request)(nil)
)

// NewRequest returns the [keyfuncs.Request] view of the call with context
// ctx (the server call's context, carrying its metadata and peer) to
// fullMethod, a method the server registered: the view the interceptors
// give key functions, [httplimit.WithSkip], [httplimit.WithCost] and
// [httplimit.WithScopeFunc], for code that decides outside them (a rules
// snapshot's middleware in a custom interceptor):
//
//   - Method is "POST" (every gRPC call is an HTTP/2 POST);
//   - Path is the full method name, "/pkg.Service/Method", as the client
//     sent it; Route is the same for a method the server registered, and
//     "(unregistered)" for any other (a call served by
//     grpc.UnknownServiceHandler, whose name the client chose), so that
//     the default scope, which is the Route, is one for all of them;
//   - Header and HeaderValues read the incoming metadata (names in any
//     case; gRPC lowercases them), so keyfuncs.APIKey("x-api-key") and
//     keyfuncs.BearerJWT read metadata as they read HTTP headers;
//   - Query is always "";
//   - RemoteAddr is the transport peer (peer.FromContext), "ip:port";
//     keyfuncs' IP resolvers strip the port and group IPv6 by /64;
//     x-forwarded-for is read only by a resolver configured with trusted
//     proxies (keyfuncs.XForwardedFor), exactly as over HTTP;
//   - Value is the call context's Value, where an authentication
//     interceptor leaves the verified principal.
//
// The view is valid only during the call it describes; methods are safe
// for use from the goroutine serving the call.
func NewRequest(ctx context.Context, fullMethod string) keyfuncs.Request {
	r := &request{}
	r.init(ctx, fullMethod, true)
	return r
}

// unregisteredRoute is the Route of a call to a method the server has not
// registered: one served by grpc.UnknownServiceHandler (a proxy), whose
// full method name is whatever the client sent. Every such call shares
// this route, and so, with the default scope, one quota per client: a
// client cannot give itself a fresh quota per invented method name. The
// interceptors tell an unregistered method by the service implementation
// grpc-go hands a stream interceptor, which is nil for the unknown-service
// handler (a service registered with a nil implementation reads as
// unregistered too); a unary interceptor only ever sees registered
// methods.
const unregisteredRoute = "(unregistered)"

func (r *request) init(ctx context.Context, fullMethod string, registered bool) {
	r.ctx, r.fullMethod, r.unregistered = ctx, fullMethod, !registered
}

// addr is the transport peer, looked up once: a call keyed by metadata
// never walks the context for it.
func (r *request) addr() net.Addr {
	if !r.peerRead {
		r.peerRead = true
		if p, ok := peer.FromContext(r.ctx); ok {
			r.peer = p.Addr
		}
	}
	return r.peer
}

// FullMethod is the full method name, "/pkg.Service/Method", as the
// client sent it.
func (r *request) FullMethod() string { return r.fullMethod }

// Method implements [keyfuncs.Request]: always "POST".
func (r *request) Method() string { return "POST" }

// Route implements [keyfuncs.Request]: the full method name of a
// registered method, else "(unregistered)".
func (r *request) Route() string {
	if r.unregistered {
		return unregisteredRoute
	}
	return r.fullMethod
}

// Path implements [keyfuncs.Request]: the full method name, as the client
// sent it (chosen by the client for an unregistered method: a scope or key
// built from it lets the client pick its quota).
func (r *request) Path() string { return r.fullMethod }

// AnyMethod tells the engine that a gRPC method has one quota whatever
// the HTTP method: the default scope is the full method name alone.
func (r *request) AnyMethod() bool { return true }

// Header implements [keyfuncs.Request]: the first value of the metadata
// key name (any case), or "".
func (r *request) Header(name string) string {
	if v := r.HeaderValues(name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// HeaderValues implements [keyfuncs.Request]: every value of the
// metadata key name (any case), or nil.
func (r *request) HeaderValues(name string) []string {
	// one key's values: FromIncomingContext would copy the whole map per
	// call. The name is lowercased first: ValueFromIncomingContext finds
	// a lowercase key by one lookup, another by iterating the map.
	return metadata.ValueFromIncomingContext(r.ctx, lowerName(name))
}

// Query implements [keyfuncs.Request]: gRPC has no query, always "".
func (r *request) Query(string) string { return "" }

// RemoteAddr implements [keyfuncs.Request]: the transport peer's address
// ("ip:port" over TCP), or "" when the server saw none.
func (r *request) RemoteAddr() string {
	a := r.addr()
	if a == nil {
		return ""
	}
	return a.String()
}

// PeerAddr is the peer's IP without a text round trip (the zero Addr when
// the peer is not a TCP or UDP address); it agrees with RemoteAddr.
func (r *request) PeerAddr() netip.Addr {
	var ip net.IP
	switch a := r.addr().(type) {
	case *net.TCPAddr:
		if a.Zone != "" {
			return netip.Addr{}
		}
		ip = a.IP
	case *net.UDPAddr:
		if a.Zone != "" {
			return netip.Addr{}
		}
		ip = a.IP
	default:
		return netip.Addr{}
	}
	ad, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return ad.Unmap()
}

// Value implements [keyfuncs.Request]: the call context's value.
func (r *request) Value(key any) any { return r.ctx.Value(key) }

// lowered caches the lowercase form of header names that have capitals.
// The names come from the server's key functions ("X-API-Key",
// "Authorization"), never from the client, so the cache stays small.
// requests pools the request views the interceptor decides with: a
// view passed as keyfuncs.Request escapes, and pooling keeps it off the
// heap per call. Key functions never retain the view (keyfuncs.Request's
// contract).
var requests = sync.Pool{New: func() any { return new(request) }}

var lowered sync.Map // string -> string

// lowerName is name in lowercase, without allocating per call.
func lowerName(name string) string {
	i := 0
	for i < len(name) && (name[i] < 'A' || name[i] > 'Z') {
		i++
	}
	if i == len(name) {
		return name
	}
	switch name { // the canonical forms keyfuncs passes, without a map lookup
	case "X-Api-Key":
		return "x-api-key"
	case "Authorization":
		return "authorization"
	case "X-Forwarded-For":
		return "x-forwarded-for"
	case "X-Real-Ip":
		return "x-real-ip"
	case "Forwarded":
		return "forwarded"
	}
	if l, ok := lowered.Load(name); ok {
		return l.(string)
	}
	l := strings.ToLower(name)
	lowered.Store(name, l)
	return l
}

// KeyParts implements the engine's key cache: the default key's parts
// without rendering the peer's address. A peer that is not IPv4 is left
// to the general path. The full method name is per-call text (grpc-go
// parses it from each request), so it is hashed, not found by address.
func (r *request) KeyParts(route bool) (p httplimit.KeyParts, ok bool) {
	a := r.PeerAddr()
	if !a.Is4() {
		return p, false
	}
	b := a.As4()
	p.PeerIP = 1<<32 | uint64(binary.BigEndian.Uint32(b[:]))
	if route {
		p.Route = r.Route() // Method "": a gRPC method accepts one HTTP method
	}
	return p, true
}
