// Package keyfuncs extracts rate-limit keys from requests: who a limit
// applies to. It is the security boundary of a rate limiter. A key a client
// can choose is a limit the client can evade (rotate the key) or turn
// against someone else (pin it to a victim's key and spend the victim's
// quota), so every function here says which deployment it is safe for and
// which attack it prevents.
//
// Key functions read a framework-neutral [Request] that every adapter
// provides ([FromHTTP] for net/http) and have the type [Func]. A Func returns
// [ErrNoKey] (wrapped) when the request carries no key of its kind, and
// another error when the material is present but invalid; callers treat any
// error as "no identity".
//
// # Client IP
//
// A [Resolver] finds the client address. Choose it by how clients reach
// your server (see Example_chooseIPKey):
//
//   - Directly (no proxy): [PeerIP], the TCP peer address. The default; the
//     only choice that needs no configuration and reads no header.
//   - Behind proxies you can list (load balancer, ingress, nginx):
//     [XForwardedFor] with their CIDRs, which walks X-Forwarded-For from the
//     right and stops at the first address that is not yours.
//   - Behind exactly n proxies whose addresses change: [HopCount](n), only if
//     clients cannot reach the server around them.
//   - Behind a proxy that sets one header to the client address (Cloudflare's
//     CF-Connecting-IP, nginx's X-Real-IP): [TrustedHeader] with the proxy's
//     CIDRs.
//   - Behind proxies speaking RFC 7239: [Forwarded] with their CIDRs.
//
// Each reads headers only when the TCP peer is one of the trusted proxies,
// and falls back to the peer address on anything malformed, so the key is
// never a value the client wrote. Addresses are normalised (zone stripped,
// IPv4-mapped IPv6 folded to IPv4) and aggregated: IPv4 to /32 and IPv6 to
// /64 by default ([Resolver.WithPrefixes] changes it), because
// one IPv6 subscriber owns 2^64 addresses and would otherwise mint a fresh
// quota, and a store entry, per request. Keys look like "203.0.113.7" and
// "2001:db8:1:2::/64".
//
// # Identity
//
// [JWTClaim] verifies a JSON Web Token (algorithm pinned, expiry required)
// and keys by a claim; [ClaimFromContext] and [ContextValue] read what an
// earlier authentication middleware verified. [APIKey] keys by a hash of an
// API key, never the secret itself; [Header] by a header a trusted layer
// sets. Client-supplied values are bounded with [Bound] before they are
// returned: long or binary values become a hash, never a truncation.
//
// # Combinators
//
// [FirstOf] takes the first function that yields a key ("the user if
// authenticated, else the IP"); [Tagged] namespaces each
// alternative so a user named "203.0.113.7" cannot share the quota of that
// address. Endpoints need no combinator: the middleware (package httplimit)
// scopes every key to the route and method. [Join] is the collision-free
// encoding of several parts into one key.
//
// Everything in this package is safe for concurrent use, and no Func panics
// on any request. The package imports no web framework.
package keyfuncs
