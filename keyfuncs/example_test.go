package keyfuncs_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/limitkit/limitkit/keyfuncs"
)

// request simulates what the server sees: the TCP peer and header lines.
func request(peer string, header ...string) keyfuncs.Request {
	r := httptest.NewRequest("GET", "/login", nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return keyfuncs.FromHTTP(r)
}

func show(fn keyfuncs.Func, req keyfuncs.Request) {
	k, err := fn(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(k)
}

// Choosing an IP key function for your deployment. The question is: who
// opens the TCP connection to your server, and what do they tell you about
// the client? Only what a proxy you trust wrote can be believed; everything
// else, the client could have written.
func Example_chooseIPKey() {
	// 1. Clients connect directly (no proxy, no load balancer): the TCP peer
	// is the client. PeerIP reads no header, so nothing can be spoofed.
	direct := keyfuncs.PeerIP()
	show(direct.Key, request("203.0.113.7:51234", "X-Forwarded-For", "198.51.100.99"))

	// 2. Behind a load balancer at 10.0.0.0/8 that appends to
	// X-Forwarded-For. The client may send its own X-Forwarded-For; the LB
	// appends the real address, so walk from the right and skip the LB.
	behindLB, err := keyfuncs.XForwardedFor("10.0.0.0/8")
	if err != nil {
		panic(err) // a bad CIDR is a start-up error
	}
	fromLB := request("10.0.0.1:40000", "X-Forwarded-For", "198.51.100.99, 203.0.113.7")
	show(behindLB.Key, fromLB)
	// PeerIP here would put every client in the LB's bucket:
	show(direct.Key, fromLB)

	// 3. Behind Cloudflare, which sets CF-Connecting-IP. Trust it only from
	// Cloudflare's ranges (https://www.cloudflare.com/ips/; two shown).
	cloudflare, err := keyfuncs.TrustedHeader("CF-Connecting-IP", "173.245.48.0/20", "2400:cb00::/32")
	if err != nil {
		panic(err)
	}
	show(cloudflare.Key, request("173.245.48.10:443", "CF-Connecting-IP", "2001:db8:1:2::7"))
	// The same header from anyone else is ignored: the attacker is keyed by
	// its own address, not by the victim it names.
	show(cloudflare.Key, request("198.51.100.50:443", "CF-Connecting-IP", "203.0.113.7"))

	// 4. Behind exactly two proxies (CDN, then LB) whose addresses change,
	// with the server firewalled so only the LB can reach it: count hops.
	twoHops, err := keyfuncs.HopCount(2)
	if err != nil {
		panic(err)
	}
	show(twoHops.Key, request("10.0.0.1:40000", "X-Forwarded-For", "198.51.100.99, 203.0.113.7, 192.0.2.10"))

	// 5. Behind proxies speaking RFC 7239 Forwarded.
	rfc7239, err := keyfuncs.Forwarded("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	show(rfc7239.Key, request("10.0.0.1:40000", "Forwarded", `for=198.51.100.99, for="[2001:db8:cafe::17]:4711"`))

	// Output:
	// 203.0.113.7
	// 203.0.113.7
	// 10.0.0.1
	// 2001:db8:1:2::/64
	// 198.51.100.50
	// 203.0.113.7
	// 2001:db8:cafe::/64
}

func ExamplePeerIP() {
	ip := keyfuncs.PeerIP()
	show(ip.Key, request("203.0.113.7:51234"))
	show(ip.Key, request("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443")) // one /64, one key
	show(ip.Key, request("[::ffff:203.0.113.7]:443"))               // IPv4-mapped folds to IPv4
	// Output:
	// 203.0.113.7
	// 2001:db8:1:2::/64
	// 203.0.113.7
}

func ExampleXForwardedFor() {
	ip, err := keyfuncs.XForwardedFor("10.0.0.0/8", "fd00::/8")
	if err != nil {
		panic(err)
	}
	// Forged leftmost entry, a second internal proxy, repeated header lines.
	show(ip.Key, request("10.0.0.1:40000",
		"X-Forwarded-For", "198.51.100.99",
		"X-Forwarded-For", "203.0.113.7, 10.0.0.2"))
	// Garbage where a proxy's entry should be: fall back to the peer.
	show(ip.Key, request("10.0.0.1:40000", "X-Forwarded-For", "198.51.100.99, garbage, 10.0.0.2"))
	_, err = keyfuncs.XForwardedFor("10.0.0.1/8")
	fmt.Println(err)
	// Output:
	// 203.0.113.7
	// 10.0.0.1
	// keyfuncs: trusted proxy "10.0.0.1/8" has host bits set: write 10.0.0.0/8 for the network or 10.0.0.1/32 for the single address
}

func ExampleHopCount() {
	// One load balancer, reachable only from it: the client is the rightmost
	// entry. Passing the LB's range also refuses headers from anyone else.
	ip, err := keyfuncs.HopCount(1, "10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	show(ip.Key, request("10.0.0.1:40000", "X-Forwarded-For", "198.51.100.99, 203.0.113.7"))
	show(ip.Key, request("198.51.100.50:40000", "X-Forwarded-For", "198.51.100.99"))
	// Output:
	// 203.0.113.7
	// 198.51.100.50
}

func ExampleTrustedHeader() {
	ip, err := keyfuncs.TrustedHeader("X-Real-IP", "10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	show(ip.Key, request("10.0.0.1:40000", "X-Real-IP", "203.0.113.7"))
	// Two values: the proxy appended instead of overwriting. Ambiguous, so
	// the peer is used.
	show(ip.Key, request("10.0.0.1:40000", "X-Real-IP", "198.51.100.99", "X-Real-IP", "203.0.113.7"))
	// Output:
	// 203.0.113.7
	// 10.0.0.1
}

func ExampleForwarded() {
	ip, err := keyfuncs.Forwarded("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	show(ip.Key, request("10.0.0.1:40000", "Forwarded", "for=198.51.100.99;proto=https, for=203.0.113.7, for=10.0.0.2"))
	// An obfuscated node cannot be told apart from others: key by the proxy.
	show(ip.Key, request("10.0.0.1:40000", "Forwarded", "for=198.51.100.99, for=_hidden"))
	// Output:
	// 203.0.113.7
	// 10.0.0.1
}

func ExampleResolver_WithPrefixes() {
	ip, err := keyfuncs.PeerIP().WithPrefixes(24, 56)
	if err != nil {
		panic(err)
	}
	show(ip.Key, request("203.0.113.7:1"))
	show(ip.Key, request("[2001:db8:1:2ff::1]:1"))
	// Output:
	// 203.0.113.0/24
	// 2001:db8:1:200::/56
}

func ExampleJWTClaim() {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	user, err := keyfuncs.JWTClaim(keyfuncs.JWTConfig{
		Methods: []string{"HS256"}, // pinned: alg=none and RS/HS confusion are refused
		Key:     secret,
		Now:     func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "alice", "exp": now.Add(time.Hour).Unix(),
	}).SignedString(secret)
	show(user, request("203.0.113.7:1", "Authorization", "Bearer "+tok))

	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "alice", "exp": now.Add(-time.Hour).Unix(),
	}).SignedString(secret)
	_, err = user(request("203.0.113.7:1", "Authorization", "Bearer "+expired))
	fmt.Println(errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, keyfuncs.ErrNoKey))

	_, err = user(request("203.0.113.7:1"))
	fmt.Println(errors.Is(err, keyfuncs.ErrNoKey))
	// Output:
	// alice
	// true false
	// true
}

type principalKey struct{}

func ExampleClaimFromContext() {
	// An authentication middleware verified the token and stored its claims.
	r := httptest.NewRequest("GET", "/api1", nil)
	r = r.WithContext(context.WithValue(r.Context(), principalKey{}, jwt.MapClaims{"sub": "alice", "org": "acme"}))

	show(keyfuncs.ClaimFromContext(principalKey{}, ""), keyfuncs.FromHTTP(r))
	show(keyfuncs.ClaimFromContext(principalKey{}, "org"), keyfuncs.FromHTTP(r))
	// Output:
	// alice
	// acme
}

func ExampleAPIKey() {
	key, err := keyfuncs.APIKey("X-API-Key", "api_key")
	if err != nil {
		panic(err)
	}
	// The secret never reaches the store: the key is a hash of it.
	show(key, request("203.0.113.7:1", "X-API-Key", "abc"))
	// Output:
	// ba7816bf8f01cfea414140de5dae2223
}

// The hybrid key: the user when authenticated, else the IP, each tagged.
func ExampleFirstOf_userOrIP() {
	ip, err := keyfuncs.XForwardedFor("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	key := keyfuncs.FirstOf(keyfuncs.Tagged("user", keyfuncs.ContextValue(principalKey{})), keyfuncs.Tagged("ip", ip.Key))

	anonymous := httptest.NewRequest("POST", "/login", nil)
	anonymous.RemoteAddr = "10.0.0.1:40000"
	anonymous.Header.Set("X-Forwarded-For", "203.0.113.7")
	show(key, keyfuncs.FromHTTP(anonymous))

	// A user who named themselves "203.0.113.7" gets a different key.
	named := anonymous.WithContext(context.WithValue(anonymous.Context(), principalKey{}, "203.0.113.7"))
	show(key, keyfuncs.FromHTTP(named))
	// Output:
	// 2:ip,11:203.0.113.7,
	// 4:user,11:203.0.113.7,
}

func ExampleJoin() {
	fmt.Println(keyfuncs.Join("a:b", "c"))
	fmt.Println(keyfuncs.Join("a", "b:c"))
	// Output:
	// 3:a:b,1:c,
	// 1:a,3:b:c,
}

func ExampleFromHTTP() {
	r := httptest.NewRequest("GET", "/users/42?page=2", nil)
	r.RemoteAddr = "203.0.113.7:51234"
	var req keyfuncs.Request = keyfuncs.FromHTTP(r) // no allocation
	fmt.Println(req.Method(), req.Path(), req.Query("page"), req.RemoteAddr())
	// Output:
	// GET /users/42 2 203.0.113.7:51234
}
