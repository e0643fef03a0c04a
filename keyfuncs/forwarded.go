package keyfuncs

import (
	"net/netip"
	"strings"
)

// walkForwarded returns the first untrusted for= node from the right of the
// merged RFC 7239 Forwarded values, or peer if an element it reaches is
// malformed, lacks for=, names an obfuscated or unknown node, if every node
// is trusted, or if it would walk past maxChainWalk elements.
func (r *Resolver) walkForwarded(vals []string, peer netip.Addr) netip.Addr {
	walked := 0
	for i := len(vals) - 1; i >= 0; i-- {
		s := vals[i]
		for {
			if walked++; walked > maxChainWalk {
				return peer
			}
			rest, elem, ok := cutLastElement(s)
			if !ok {
				return peer
			}
			if elem = trimOWS(elem); elem != "" {
				a, ok := forwardedFor(elem)
				if !ok {
					return peer
				}
				if !r.trusted.contains(a) {
					return a
				}
			}
			if rest == "" {
				break
			}
			s = rest[:len(rest)-1] // drop the comma
		}
	}
	return peer
}

// cutLastElement splits s at its last comma outside a quoted string: rest is
// everything up to and including that comma ("" if there is none), elem what
// follows. ok is false for an unbalanced quote. Escapes are not interpreted
// here: an element containing a backslash is rejected by forwardedFor, so a
// misplaced split can only make an element fail, never succeed.
func cutLastElement(s string) (rest, elem string, ok bool) {
	inQuote := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				return s[:i+1], s[i+1:], true
			}
		}
	}
	if inQuote {
		return "", "", false
	}
	return "", s, true
}

// forwardedFor parses one forwarded-element (pairs separated by ';') and
// returns the normalised address of its for= node. ok is false if the
// element is malformed, has no or several for= parameters, or its node is
// not an IP address (obfuscated "_x", "unknown").
func forwardedFor(elem string) (netip.Addr, bool) {
	var node string
	found := false
	for {
		elem = trimOWS(elem)
		i := 0
		for i < len(elem) && isTchar(elem[i]) {
			i++
		}
		if i == 0 || i == len(elem) || elem[i] != '=' {
			return netip.Addr{}, false
		}
		name := elem[:i]
		elem = elem[i+1:]
		var val string
		if elem != "" && elem[0] == '"' {
			end := strings.IndexByte(elem[1:], '"')
			if end < 0 {
				return netip.Addr{}, false
			}
			val = elem[1 : 1+end]
			if strings.IndexByte(val, '\\') >= 0 {
				return netip.Addr{}, false // quoted-pairs never occur in a node
			}
			elem = elem[end+2:]
		} else {
			j := 0
			for j < len(elem) && (isTchar(elem[j]) || elem[j] == ':' || elem[j] == '[' || elem[j] == ']') {
				j++
			}
			val = elem[:j]
			elem = elem[j:]
		}
		if len(name) == 3 && strings.EqualFold(name, "for") {
			if found {
				return netip.Addr{}, false // RFC 7239 4: a parameter occurs once per element
			}
			node, found = val, true
		}
		elem = trimOWS(elem)
		if elem == "" {
			break
		}
		if elem[0] != ';' {
			return netip.Addr{}, false
		}
		elem = elem[1:]
	}
	if !found {
		return netip.Addr{}, false
	}
	return parseNode(node)
}

// parseNode parses an RFC 7239 node: nodename [ ":" node-port ], where
// nodename is an IPv4 address, a bracketed IPv6 address, "unknown" or an
// obfuscated identifier ("_hidden"), and node-port a port or an obfuscated
// port. Only IP addresses succeed. An unbracketed IPv6 address (written by
// lenient proxies) is accepted when it parses as a whole.
func parseNode(s string) (netip.Addr, bool) {
	if s == "" || s[0] == '_' || strings.EqualFold(s, "unknown") {
		return netip.Addr{}, false
	}
	if a, ok := parseIP(s); ok {
		return a, true
	}
	// An obfuscated port: "192.0.2.43:_x1", "[2001:db8::1]:_x1".
	i := strings.LastIndexByte(s, ':')
	if i < 0 || i+1 >= len(s) || s[i+1] != '_' || !isObfuscated(s[i+1:]) {
		return netip.Addr{}, false
	}
	host := s[:i]
	if host != "" && host[0] == '[' {
		if host[len(host)-1] != ']' {
			return netip.Addr{}, false
		}
	} else if strings.IndexByte(host, ':') >= 0 {
		return netip.Addr{}, false // an IPv6 node with a port must be bracketed
	}
	return parseIP(host)
}

// isObfuscated reports whether s matches RFC 7239's obfnode/obfport:
// "_" 1*( ALPHA / DIGIT / "." / "_" / "-" ).
func isObfuscated(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
