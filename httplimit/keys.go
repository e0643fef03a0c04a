package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/limitkit/limitkit/keyfuncs"
)

// maxKeyLen is the longest key-function result used verbatim; longer ones
// are hashed with keyfuncs.Bound.
const maxKeyLen = 256

// keySep separates the scope from the client key in a store key.
const keySep = '|'

// fallbackPrefix marks keys produced by the fallback key function, so that
// a fallback IP key never shares quota with an identical-looking primary key
// (an API key "203.0.113.7"). '~' followed by a non-hex byte is disjoint
// from keyfuncs.Bound's "~<hex>" digests.
const fallbackPrefix = "~fb/"

// keyStatus is what a check's key derivation gave: a key, skip the
// check, deny for want of a key, or a refusal: a keyfuncs.Refusal's HTTP
// status (400 and up), the key string then carrying its Detail.
type keyStatus uint16

const (
	keyOK keyStatus = iota
	keySkip
	keyDeny
)

// refusedStatus is the keyStatus of a refusal (keyfuncs.Refusal): its
// status, which is 400 or more; a status out of 400-499 is refused as 400.
func refusedStatus(r *keyfuncs.Refusal) keyStatus {
	if r.Status < 400 || r.Status > 499 {
		return 400
	}
	return keyStatus(r.Status)
}

// PeerAddrer is implemented by request views that hold the TCP peer as an
// address (fiberlimit's: fasthttp keeps a net.Addr), so the default key
// needs no text round trip. PeerAddr returns the peer with IPv4-mapped
// IPv6 addresses unmapped, or the zero Addr when the peer is not an IP;
// it must agree with RemoteAddr.
type PeerAddrer interface {
	PeerAddr() netip.Addr
}

var errEmptyKey = fmt.Errorf("%w: the key function returned an empty key", keyfuncs.ErrNoKey)

// cachedKey is key for an engine whose store key is a function of the
// request's KeyParts (see keycache.go): from the key cache when the
// parts were seen recently, else from key, whose result is cached when
// it came from the check's own key function (a fallback key may read
// anything).
func (e *Engine) cachedKey(ctx context.Context, c *check, req Request) (string, keyStatus) {
	var p KeyParts
	switch r := req.(type) {
	case KeyParter:
		var ok bool
		if p, ok = r.KeyParts(!e.scopeFixed); !ok {
			key, st, _ := e.generalKey(ctx, c, req)
			return key, st
		}
	default:
		p.Peer, p.StableRoute = req.RemoteAddr(), true
		if !e.scopeFixed {
			p.Method, p.Route = scopeMethod(req), req.Route()
		}
	}
	key, slot := keys.get(e.cacheID, &p)
	if key != "" {
		return key, keyOK
	}
	return e.missedKey(ctx, c, req, &p, slot)
}

// missedKey is the general path's key for req, whose parts p the key
// cache missed at slot: cached under p when it came from the check's own
// key function (a fallback key may read anything).
func (e *Engine) missedKey(ctx context.Context, c *check, req Request, p *KeyParts, slot slotRef) (string, keyStatus) {
	key, st, own := e.generalKey(ctx, c, req)
	if st == keyOK && own {
		keys.put(slot, e.cacheID, p, key)
	}
	return key, st
}

// generalKey is key after the request's scope, built in a stack buffer:
// the path without the key cache.
func (e *Engine) generalKey(ctx context.Context, c *check, req Request) (string, keyStatus, bool) {
	var kbuf [192]byte
	return e.key(ctx, c, req, e.appendScope(kbuf[:0], req))
}

// key derives check c's store key: scope, '|', client key. own reports
// that the key came from the check's key function, not the fallback.
func (e *Engine) key(ctx context.Context, c *check, req Request, scope []byte) (key string, st keyStatus, own bool) {
	// built in place after the scope; interned (copied) before the next
	// check reuses the bytes
	b := scope
	b = append(b, keySep)
	n := len(b)
	// the peer IP resolver keys an IPv4 peer by its full address (its
	// default /32: keyfuncs pins it), so the address is the key
	if c.key.ip == e.peer {
		if kb, ok := appendPeerIPv4(b, req); ok {
			return interned.intern(kb), keyOK, true
		}
	}
	b, err := appendKey(b, c.key, req)
	if err == nil {
		return interned.intern(b), keyOK, true
	}
	var ref *keyfuncs.Refusal
	if errors.As(err, &ref) {
		// the identity is there but unreadable as the handler would read
		// it: refused, never keyed by the fallback nor skipped
		return ref.Detail, refusedStatus(ref), false
	}
	if !errors.Is(err, keyfuncs.ErrNoKey) {
		e.report(ctx, fmt.Errorf("%s: key for policy %q: %w", e.pkg, c.policy.Name, err))
	}
	switch e.cfg.noKey {
	case noKeySkip:
		return "", keySkip, false
	case noKeyDeny:
		return "", keyDeny, false
	}
	b = append(b[:n], fallbackPrefix...)
	b, err = appendKey(b, e.cfg.fallback, req)
	if err == nil {
		return interned.intern(b), keyOK, false
	}
	if !errors.Is(err, keyfuncs.ErrNoKey) {
		e.report(ctx, fmt.Errorf("%s: fallback key for policy %q: %w", e.pkg, c.policy.Name, err))
	} else {
		// Not the client's doing when the fallback is the peer IP: the
		// server listens on a Unix socket or the adapter lost the peer.
		// Every such request is denied; say why to the operator.
		e.report(ctx, fmt.Errorf("%s: policy %q: no key, and the fallback key found none either (denied with 403; behind a proxy on a Unix socket, key by a header the proxy sets): %w", e.pkg, c.policy.Name, err))
	}
	return "", keyDeny, false
}

// appendPeerIPv4 is the default key (keyfuncs.PeerIP, IPv4 kept whole)
// for the common case, an IPv4 peer, without parsing into a netip.Addr
// and printing it back: it appends the peer's address when RemoteAddr is
// a canonical dotted quad (what net/http and every adapter write), with
// or without a valid port, and reports false for anything else, which
// the general path then decides. The result is byte for byte what
// keyfuncs.PeerIP's Prefix, printed, gives (tested against it).
func appendPeerIPv4(b []byte, req Request) ([]byte, bool) {
	if pa, ok := req.(PeerAddrer); ok {
		if a := pa.PeerAddr(); a.Is4() {
			return a.AppendTo(b), true
		}
		return b, false
	}
	// one pass: the dotted quad up to the first ':', then the port
	s := req.RemoteAddr()
	dots, digits, n, i := 0, 0, 0, 0
	for ; i < len(s); i++ {
		c := s[i]
		if d := c - '0'; d <= 9 {
			if digits > 0 && n == 0 {
				return b, false // a leading zero: not canonical
			}
			n = n*10 + int(d)
			digits++
			if n > 255 {
				return b, false
			}
			continue
		}
		if c == '.' && digits > 0 {
			dots++
			digits, n = 0, 0
			continue
		}
		if c == ':' {
			break
		}
		return b, false
	}
	if dots != 3 || digits == 0 {
		return b, false
	}
	if i < len(s) && !validPort(s[i+1:]) {
		return b, false
	}
	return append(b, s[:i]...), true
}

func appendKey(b []byte, k keySpec, req Request) ([]byte, error) {
	if k.ip != nil {
		p, err := k.ip.Prefix(req)
		if err != nil {
			return b, err
		}
		if p.IsSingleIP() {
			return p.Addr().AppendTo(b), nil
		}
		return p.AppendTo(b), nil
	}
	s, err := k.fn(req)
	if err != nil {
		return b, err
	}
	if s == "" {
		return b, errEmptyKey
	}
	if len(s) > maxKeyLen {
		s = keyfuncs.Bound(s)
	}
	return append(b, s...), nil
}

// StoreKey is the store key the middleware gives client in scope:
// scope, '|', and client as it enters the key (longer than 256 bytes:
// hashed with keyfuncs.Bound, as the middleware does). client is what
// the check's key function returns for the request (the peer IP
// "203.0.113.7" by default, an IPv6 client's prefix "2001:db8::/64",
// keyfuncs.APIKey's hash of the key, a JWT's subject); scope is the
// middleware's scope: the [WithScope] value, or by default the route's
// ([RouteScope]).
//
// Use it to act on a client's counters from code, with the limiter the
// middleware was built with: lim.Reset(ctx, httplimit.StoreKey(
// httplimit.RouteScope("POST", "/login"), "alice")) unblocks alice on
// POST /login. A middleware with the default scope keeps one key per
// route for a client: reset each route the middleware covers. Keys made
// by the fallback key function ([WithFallbackKey]) are not these. Safe
// for concurrent use.
func StoreKey(scope, client string) string {
	if len(client) > maxKeyLen {
		client = keyfuncs.Bound(client)
	}
	return scope + string(keySep) + client
}

// validPort reports whether s is a decimal port number, 0-65535: the check
// keyfuncs' peer-address parsing makes (keyfuncs/internal/hostport), so
// that appendPeerIPv4 accepts exactly the addresses keyfuncs.PeerIP does
// (TestPeerIPv4FastPathAgreesOnPorts).
func validPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}
