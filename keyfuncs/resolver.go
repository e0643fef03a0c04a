package keyfuncs

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ipSource names where a [Resolver] finds the client address.
type ipSource string

// The IP sources. Every source except sourcePeer reads headers only when the
// TCP peer is a trusted proxy, and falls back to the peer address whenever
// the headers are absent, malformed or name only trusted proxies.
const (
	// sourcePeer: the TCP peer (RemoteAddr). The default.
	sourcePeer ipSource = "peer"
	// sourceXForwardedFor: X-Forwarded-For walked right to left, skipping
	// trusted proxies.
	sourceXForwardedFor ipSource = "x-forwarded-for"
	// sourceHopCount: the Hops-th X-Forwarded-For entry from the right.
	sourceHopCount ipSource = "hop-count"
	// sourceHeader: a single-address header set by the proxy (X-Real-IP,
	// CF-Connecting-IP, True-Client-IP).
	sourceHeader ipSource = "header"
	// sourceForwarded: the RFC 7239 Forwarded header, for= walked right to
	// left, skipping trusted proxies.
	sourceForwarded ipSource = "forwarded"
)

// maxHops bounds [HopCount]; real deployments have one to three proxies.
const maxHops = 64

// maxChainWalk is the most list elements (empty ones included) a resolver
// examines in X-Forwarded-For or Forwarded per request. Every element it
// walks past is a trusted proxy, and no real chain has this many; a longer
// trusted chain falls back to the peer address. It bounds the work per
// request whatever the header length: client-written entries sit to the
// left of the first proxy-appended one and are never reached.
const maxChainWalk = 2 * maxHops

// ipConfig is the configuration of a client-IP key function that the
// constructors [PeerIP], [XForwardedFor], [HopCount], [TrustedHeader] and
// [Forwarded] build and newIPResolver validates.
type ipConfig struct {
	// Source is where the client address comes from. Default (""): sourcePeer.
	Source ipSource `json:"source" yaml:"source"`
	// TrustedProxies are the CIDRs ("10.0.0.0/8") or addresses of the
	// proxies in front of this server. Required for sourceXForwardedFor,
	// sourceHeader and sourceForwarded; optional for sourceHopCount (when
	// set, the hop count is honoured only for requests from these peers);
	// refused for sourcePeer. Default: none.
	TrustedProxies []string `json:"trusted_proxies" yaml:"trusted_proxies"`
	// Hops is the number of trusted proxies in front of this server, for
	// sourceHopCount: the client is the Hops-th X-Forwarded-For entry from
	// the right. Required (1..64) for sourceHopCount, refused otherwise.
	Hops int `json:"hops" yaml:"hops"`
	// Header is the single-address header for sourceHeader ("X-Real-IP",
	// "CF-Connecting-IP"). Required for sourceHeader, refused otherwise.
	Header string `json:"header" yaml:"header"`
	// IPv4Prefix is the prefix length IPv4 clients are aggregated to,
	// 16..32. Default (0): 32, one key per address.
	IPv4Prefix int `json:"ipv4_prefix" yaml:"ipv4_prefix"`
	// IPv6Prefix is the prefix length IPv6 clients are aggregated to,
	// 32..128. Default (0): 64, one key per subscriber network (/56 or /48
	// for ISPs that hand those out; /128 only if you know every client has a
	// single address).
	IPv6Prefix int `json:"ipv6_prefix" yaml:"ipv6_prefix"`
}

// Resolver finds a request's client IP address the way the constructor
// that built it says and turns it into a rate-limit key. Its method [Resolver.Key] is a [Func].
//
// Whatever the configuration, a Resolver never returns an address the client
// chose unless a trusted proxy vouched for it: headers from an untrusted
// peer are ignored, and any malformed entry, obfuscated or "unknown" node, or
// a chain made only of trusted proxies falls back to the TCP peer address.
// (Falling back puts such requests in the bucket of the proxy that sent them:
// a spoofer can only share that bucket, never pick someone else's.)
//
// The zero value, and a nil *Resolver, resolve the TCP peer with the default
// aggregation (/32 for IPv4, /64 for IPv6). A Resolver is immutable and safe
// for concurrent use.
type Resolver struct {
	source  ipSource
	trusted trustSet
	hops    int
	header  string // canonical header name for sourceHeader
	v4Bits  int    // 0 means defaultIPv4Prefix
	v6Bits  int    // 0 means defaultIPv6Prefix
}

// newIPResolver validates cfg and returns its Resolver. Every configuration
// mistake (unknown source, bad CIDR, missing trusted proxies, out-of-range
// prefix or hop count) is an error naming what to fix.
func newIPResolver(cfg ipConfig) (*Resolver, error) {
	r := &Resolver{source: cfg.Source}
	if r.source == "" {
		r.source = sourcePeer
	}
	var err error
	if r.trusted, err = parseTrusted(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	switch r.source {
	case sourcePeer:
		if len(r.trusted) > 0 {
			return nil, errors.New("keyfuncs: source \"peer\" reads no headers, so trusted proxies have no effect: choose a proxy-aware source or drop them")
		}
	case sourceXForwardedFor, sourceForwarded, sourceHeader:
		if len(r.trusted) == 0 {
			return nil, fmt.Errorf("keyfuncs: source %q needs at least one trusted proxy CIDR: without one every header is ignored and all clients key as the peer", r.source)
		}
	case sourceHopCount:
	default:
		return nil, fmt.Errorf("keyfuncs: unknown IP source %q: use %q, %q, %q, %q or %q",
			cfg.Source, sourcePeer, sourceXForwardedFor, sourceHopCount, sourceHeader, sourceForwarded)
	}
	if r.source == sourceHopCount {
		if cfg.Hops < 1 || cfg.Hops > maxHops {
			return nil, fmt.Errorf("keyfuncs: hop count %d out of range: set it to the number of proxies in front of the server, 1..%d", cfg.Hops, maxHops)
		}
		r.hops = cfg.Hops
	} else if cfg.Hops != 0 {
		return nil, fmt.Errorf("keyfuncs: hops is only used by source %q, not %q", sourceHopCount, r.source)
	}
	if r.source == sourceHeader {
		if !isToken(cfg.Header) {
			return nil, fmt.Errorf("keyfuncs: source %q needs a valid header name (e.g. X-Real-IP), got %q", sourceHeader, cfg.Header)
		}
		r.header = http.CanonicalHeaderKey(cfg.Header)
	} else if cfg.Header != "" {
		return nil, fmt.Errorf("keyfuncs: header is only used by source %q, not %q", sourceHeader, r.source)
	}
	if err := r.setPrefixes(cfg.IPv4Prefix, cfg.IPv6Prefix); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Resolver) setPrefixes(v4, v6 int) error {
	if v4 != 0 && (v4 < minIPv4Prefix || v4 > 32) {
		return fmt.Errorf("keyfuncs: IPv4 prefix /%d out of range: use %d..32 (32 keys each address)", v4, minIPv4Prefix)
	}
	if v6 != 0 && (v6 < minIPv6Prefix || v6 > 128) {
		return fmt.Errorf("keyfuncs: IPv6 prefix /%d out of range: use %d..128 (64 is one subscriber network)", v6, minIPv6Prefix)
	}
	r.v4Bits, r.v6Bits = v4, v6
	return nil
}

// PeerIP keys requests by the TCP peer address (RemoteAddr), aggregated to
// /32 for IPv4 and /64 for IPv6. It reads no header.
//
// Safe for: servers that clients reach directly, with no proxy or load
// balancer in front. It is the only IP key function that needs no
// configuration, and the only one that cannot be spoofed by a header.
// Behind a proxy every client shares the proxy's address (one bucket for
// everyone): use one of the proxy-aware resolvers instead.
func PeerIP() *Resolver { return &Resolver{source: sourcePeer} }

// XForwardedFor keys requests by the client address in X-Forwarded-For,
// for servers behind one or more proxies whose addresses are in
// trustedCIDRs. Every proxy appends the address of its own peer, so the
// header is walked from the right: trusted proxies are skipped and the first
// untrusted entry is the client. Repeated X-Forwarded-For headers are merged
// in order, as RFC 9110 says.
//
// Attacks prevented: a client-written leftmost entry (the value echo, gin
// and many limiters trust) is never reached while a proxy-appended entry is
// to its right, so rotating it cannot evade the limit and pinning it to a
// victim cannot lock the victim out. The header is ignored unless the peer
// is trusted (a client that bypasses the proxy cannot use it); garbage in
// the walked part of the chain, or a chain of only trusted proxies, falls
// back to the peer; IPv4-mapped and zoned spellings of a trusted proxy are
// recognised; a 10,000-entry header costs no more than a short one, since
// the walk stops at the first untrusted entry and never examines more than
// 2 × 64 elements.
//
// Safe for: any deployment where every proxy in front of the server appends
// to X-Forwarded-For and is listed. Entries may carry ports. Construction
// fails on an empty list or an invalid CIDR.
func XForwardedFor(trustedCIDRs ...string) (*Resolver, error) {
	return newIPResolver(ipConfig{Source: sourceXForwardedFor, TrustedProxies: trustedCIDRs})
}

// HopCount keys requests by the n-th X-Forwarded-For entry from the right,
// for servers behind exactly n proxies that each append to the header (n=1
// behind one load balancer; n=2 behind a CDN and a load balancer). It needs
// no list of proxy addresses, which suits load balancers with changing
// addresses.
//
// Safe for: servers that are reachable only through their n proxies
// (firewalled). A client that reaches the server directly controls the whole
// header; pass trustedCIDRs to honour the header only from those peers. If
// the header has fewer than n entries, or any of the n rightmost entries is
// malformed, the peer address is used. A client-written leftmost entry is
// never reached. Construction fails unless 1 <= n <= 64.
func HopCount(n int, trustedCIDRs ...string) (*Resolver, error) {
	return newIPResolver(ipConfig{Source: sourceHopCount, Hops: n, TrustedProxies: trustedCIDRs})
}

// TrustedHeader keys requests by a single-address header that a proxy in
// trustedCIDRs sets: X-Real-IP (nginx), CF-Connecting-IP (Cloudflare; list
// Cloudflare's published ranges), True-Client-IP (Akamai).
//
// The header is read only when the TCP peer is trusted, so a client that
// reaches the server directly cannot set it. It must hold exactly one
// address (optionally with a port): a repeated header or a list is treated
// as tampering and falls back to the peer address, as does garbage.
//
// Safe for: deployments whose proxy overwrites the header on every request
// (nginx `proxy_set_header X-Real-IP $remote_addr;`, Cloudflare). If the
// proxy passes a client-sent header through, the client chooses its key:
// use [XForwardedFor] then. Construction fails on an invalid header name, an
// empty list or an invalid CIDR.
func TrustedHeader(name string, trustedCIDRs ...string) (*Resolver, error) {
	return newIPResolver(ipConfig{Source: sourceHeader, Header: name, TrustedProxies: trustedCIDRs})
}

// Forwarded keys requests by the RFC 7239 Forwarded header, for servers
// behind proxies in trustedCIDRs that append forwarded-elements to it: the
// for= parameters are walked from the right, skipping trusted proxies, and
// the first untrusted one is the client. Quoted IPv6 nodes with ports
// (for="[2001:db8::1]:4711") are understood; unquoted IPv6 written by
// lenient proxies is accepted too.
//
// An obfuscated (for=_hidden) or "unknown" node, an element without for=, a
// duplicated for= or any malformed element in the walked part falls back to
// the peer address: the limiter cannot tell such clients apart, so it keys
// them by the proxy rather than by anything the client wrote. Headers from an
// untrusted peer are ignored. X-Forwarded-For is not consulted.
//
// Safe for: deployments whose every proxy appends to Forwarded and is
// listed. Construction fails on an empty list or an invalid CIDR.
func Forwarded(trustedCIDRs ...string) (*Resolver, error) {
	return newIPResolver(ipConfig{Source: sourceForwarded, TrustedProxies: trustedCIDRs})
}

// WithPrefixes returns a copy of r that aggregates IPv4 clients to /v4Bits
// (16..32) and IPv6 clients to /v6Bits (32..128); 0 keeps the default (32,
// 64). Coarser prefixes resist address rotation better and lump more
// neighbours together. r itself is unchanged.
func (r *Resolver) WithPrefixes(v4Bits, v6Bits int) (*Resolver, error) {
	c := *r.orZero()
	if err := c.setPrefixes(v4Bits, v6Bits); err != nil {
		return nil, err
	}
	return &c, nil
}

// Source reports where r finds the client address.
func (r *Resolver) effectiveSource() ipSource {
	if r = r.orZero(); r.source == "" {
		return sourcePeer
	}
	return r.source
}

// String describes the configuration, for logs.
func (r *Resolver) String() string {
	r = r.orZero()
	var b strings.Builder
	fmt.Fprintf(&b, "keyfuncs.Resolver{source=%s", r.effectiveSource())
	if len(r.trusted) > 0 {
		fmt.Fprintf(&b, " trusted=%v", []netip.Prefix(r.trusted))
	}
	if r.hops > 0 {
		fmt.Fprintf(&b, " hops=%d", r.hops)
	}
	if r.header != "" {
		fmt.Fprintf(&b, " header=%s", r.header)
	}
	v4, v6 := r.prefixes()
	fmt.Fprintf(&b, " ipv4=/%d ipv6=/%d}", v4, v6)
	return b.String()
}

// orZero maps a nil *Resolver to the zero value, so that a nil resolver
// keys by the peer instead of panicking on the request path.
func (r *Resolver) orZero() *Resolver {
	if r == nil {
		return &zeroResolver
	}
	return r
}

var zeroResolver Resolver

func (r *Resolver) prefixes() (v4, v6 int) {
	v4, v6 = r.v4Bits, r.v6Bits
	if v4 == 0 {
		v4 = defaultIPv4Prefix
	}
	if v6 == 0 {
		v6 = defaultIPv6Prefix
	}
	return v4, v6
}

// errNoPeer is returned when RemoteAddr is not an IP address (a Unix socket,
// an adapter that does not know the peer).
var errNoPeer = fmt.Errorf("%w: the peer address is not an IP address", ErrNoKey)

// Key returns the client's aggregated address as a key: "203.0.113.7" for
// IPv4 (with the default /32), "2001:db8:1:2::/64" for IPv6 (with the
// default /64). It fails, wrapping [ErrNoKey], only when RemoteAddr is not an
// IP address. It allocates only the returned string. Key is a [Func].
func (r *Resolver) Key(req Request) (string, error) {
	p, err := r.Prefix(req)
	if err != nil {
		return "", err
	}
	return prefixKey(p), nil
}

// Prefix is [Resolver.Key] before rendering: the client's address masked to
// the configured prefix. It does not allocate.
func (r *Resolver) Prefix(req Request) (netip.Prefix, error) {
	a, err := r.ClientIP(req)
	if err != nil {
		return netip.Prefix{}, err
	}
	v4, v6 := r.orZero().prefixes()
	return aggregate(a, v4, v6), nil
}

// ClientIP returns the client's full address (not aggregated), normalised:
// zone stripped, IPv4-mapped IPv6 folded to IPv4. Use it for logs; use
// [Resolver.Key] for limits. It fails, wrapping [ErrNoKey], only when
// RemoteAddr is not an IP address. It does not allocate.
func (r *Resolver) ClientIP(req Request) (netip.Addr, error) {
	r = r.orZero()
	peer, ok := parseIP(req.RemoteAddr())
	if !ok {
		return netip.Addr{}, errNoPeer
	}
	switch r.source {
	case sourceXForwardedFor:
		if !r.trusted.contains(peer) {
			return peer, nil
		}
		return r.walkXFF(req.HeaderValues("X-Forwarded-For"), peer), nil
	case sourceHopCount:
		if len(r.trusted) > 0 && !r.trusted.contains(peer) {
			return peer, nil
		}
		return r.hopXFF(req.HeaderValues("X-Forwarded-For"), peer), nil
	case sourceHeader:
		if !r.trusted.contains(peer) {
			return peer, nil
		}
		vals := req.HeaderValues(r.header)
		if len(vals) != 1 {
			return peer, nil
		}
		a, ok := parseIP(trimOWS(vals[0]))
		if !ok {
			return peer, nil
		}
		return a, nil
	case sourceForwarded:
		if !r.trusted.contains(peer) {
			return peer, nil
		}
		return r.walkForwarded(req.HeaderValues("Forwarded"), peer), nil
	default:
		return peer, nil
	}
}

// walkXFF returns the first untrusted address from the right of the merged
// X-Forwarded-For values, or peer if an entry it reaches is malformed, every
// entry is trusted, or it would walk past maxChainWalk elements. It never
// splits the header into a slice.
func (r *Resolver) walkXFF(vals []string, peer netip.Addr) netip.Addr {
	walked := 0
	for i := len(vals) - 1; i >= 0; i-- {
		s := vals[i]
		for {
			if walked++; walked > maxChainWalk {
				return peer
			}
			j := strings.LastIndexByte(s, ',')
			if e := trimOWS(s[j+1:]); e != "" { // empty list elements are ignored (RFC 9110 5.6.1)
				a, ok := parseIP(e)
				if !ok {
					return peer
				}
				if !r.trusted.contains(a) {
					return a
				}
			}
			if j < 0 {
				break
			}
			s = s[:j]
		}
	}
	return peer
}

// hopXFF returns the r.hops-th entry from the right of the merged
// X-Forwarded-For values, or peer if there are fewer entries or one of the
// entries it reaches is malformed.
func (r *Resolver) hopXFF(vals []string, peer netip.Addr) netip.Addr {
	n, walked := 0, 0
	for i := len(vals) - 1; i >= 0; i-- {
		s := vals[i]
		for {
			if walked++; walked > maxChainWalk {
				return peer
			}
			j := strings.LastIndexByte(s, ',')
			if e := trimOWS(s[j+1:]); e != "" {
				a, ok := parseIP(e)
				if !ok {
					return peer
				}
				if n++; n == r.hops {
					return a
				}
			}
			if j < 0 {
				break
			}
			s = s[:j]
		}
	}
	return peer
}

// isToken reports whether s is a non-empty RFC 9110 token (a valid header
// or parameter name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool { return tchar[c] }

// tchar is the RFC 9110 token alphabet.
var tchar = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
