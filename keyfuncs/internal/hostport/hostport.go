// Package hostport holds the host:port check of keyfuncs' peer-address
// parsing. httplimit's IPv4 fast path keeps a copy of ValidPort (it cannot
// import this package), held to it by httplimit's
// TestPeerIPv4FastPathAgreesOnPorts. It is internal: users call keyfuncs.
package hostport

// ValidPort reports whether s is a decimal port number, 0-65535.
func ValidPort(s string) bool {
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
