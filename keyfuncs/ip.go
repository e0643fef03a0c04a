package keyfuncs

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/limitkit/limitkit/keyfuncs/internal/hostport"
)

// maxHostLen bounds the text of one address we try to parse. The longest
// legitimate form, "[IPv6%zone]:port", is well under it; longer input is
// garbage and is rejected before it reaches the parser.
const maxHostLen = 96

// parseHost parses one address as found in RemoteAddr, X-Forwarded-For,
// X-Real-IP or a Forwarded node: "203.0.113.7", "203.0.113.7:443",
// "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:443", "fe80::1%eth0",
// "[fe80::1%eth0]:443". The result is not normalised (see normalize).
func parseHost(s string) (netip.Addr, bool) {
	if s == "" || len(s) > maxHostLen {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !hostport.ValidPort(rest[1:])) {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		return a, true
	}
	// Decide the form by its colons before parsing: a failed netip parse
	// allocates its error, and "ip:port" is the common RemoteAddr form.
	i := strings.IndexByte(s, ':')
	if i < 0 || strings.IndexByte(s[i+1:], ':') >= 0 {
		// No colon: IPv4. Two or more: IPv6 (a port needs brackets).
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, false
		}
		return a, true
	}
	// One colon: IPv4 with a port.
	if !hostport.ValidPort(s[i+1:]) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s[:i])
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, true
}

// normalize strips the zone and folds an IPv4-mapped IPv6 address
// (::ffff:192.0.2.1) to IPv4, so that one host has one spelling: neither a
// zone suffix nor the mapped form can mint a second key for the same client
// or hide a trusted proxy behind an alias.
func normalize(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

// parseIP is parseHost followed by normalize.
func parseIP(s string) (netip.Addr, bool) {
	a, ok := parseHost(s)
	if !ok {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

// trimOWS trims HTTP optional whitespace (space and horizontal tab).
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// trustSet is a list of trusted proxy ranges, matched against normalised
// addresses. Deployments trust a handful of ranges (Cloudflare publishes about
// twenty), so a linear scan beats any index.
type trustSet []netip.Prefix

func (t trustSet) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseTrusted parses CIDRs ("10.0.0.0/8", "2001:db8::/32") or bare
// addresses ("10.0.0.1" is 10.0.0.1/32). IPv4-mapped ranges are folded to
// IPv4, as addresses are, so "::ffff:10.0.0.0/104" and "10.0.0.0/8" mean the
// same. A range with host bits set ("10.0.0.1/8") is refused: it is a typo
// for either 10.0.0.0/8 or 10.0.0.1/32, and guessing which would widen or
// narrow the trust silently.
func parseTrusted(cidrs []string) (trustSet, error) {
	t := make(trustSet, 0, len(cidrs))
	for _, c := range cidrs {
		s := strings.TrimSpace(c)
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("keyfuncs: trusted proxy %q is neither a CIDR nor an IP address", c)
			}
			a = normalize(a)
			t = append(t, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("keyfuncs: trusted proxy %q is not a valid CIDR: %v", c, err)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("keyfuncs: trusted proxy %q has host bits set: write %s for the network or %s for the single address",
				c, p.Masked(), netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		t = append(t, p)
	}
	return t, nil
}

// Aggregation defaults and bounds (prefix lengths in bits).
const (
	// defaultIPv4Prefix keys IPv4 clients by their full address.
	defaultIPv4Prefix = 32
	// defaultIPv6Prefix keys IPv6 clients by their /64: the smallest block an
	// ISP assigns to one subscriber, so one machine rotating through its 2^64
	// addresses stays one key instead of exhausting the store.
	defaultIPv6Prefix = 64
	// minIPv4Prefix and minIPv6Prefix are the coarsest aggregations accepted;
	// coarser would lump unrelated subscribers together.
	minIPv4Prefix = 16
	minIPv6Prefix = 32
)

// aggregate masks a normalised address to the configured prefix.
func aggregate(a netip.Addr, v4Bits, v6Bits int) netip.Prefix {
	bits := v6Bits
	if a.Is4() {
		bits = v4Bits
	}
	p, err := a.Prefix(bits)
	if err != nil { // unreachable for validated bits; fall back to the host
		return netip.PrefixFrom(a, a.BitLen())
	}
	return p
}

// prefixKey renders an aggregated prefix as a key: the bare address for a
// single host ("203.0.113.7", "2001:db8::1"), CIDR notation otherwise
// ("2001:db8:1:2::/64"). One allocation: the returned string.
func prefixKey(p netip.Prefix) string {
	var buf [64]byte
	var b []byte
	if p.IsSingleIP() {
		b = p.Addr().AppendTo(buf[:0])
	} else {
		b = p.AppendTo(buf[:0])
	}
	return string(b)
}
