// Package hostport holds the host:port checks that keyfuncs and the
// adapters' engine share, so that both accept exactly the same peer
// addresses. It is internal: users call keyfuncs.
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
