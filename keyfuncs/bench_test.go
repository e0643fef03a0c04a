package keyfuncs

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// benchKey runs fn on req serially and under RunParallel.
func benchKey(b *testing.B, fn Func, req Request) {
	b.Helper()
	if _, err := fn(req); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fn(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := fn(req); err != nil {
					panic(err)
				}
			}
		})
	})
}

func xffOf(n int, format string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(format, i/256%256, i%256)
	}
	return strings.Join(parts, ", ")
}

func BenchmarkPeerIP(b *testing.B) {
	b.Run("v4", func(b *testing.B) { benchKey(b, PeerIP().Key, newReq(b, "203.0.113.7:51234")) })
	b.Run("v6", func(b *testing.B) { benchKey(b, PeerIP().Key, newReq(b, "[2001:db8:1:2:3:4:5:6]:51234")) })
}

func BenchmarkXFF(b *testing.B) {
	xff := must(XForwardedFor(trustedProxies...))
	b.Run("3hop", func(b *testing.B) {
		benchKey(b, xff.Key, newReq(b, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP+", 10.0.0.2"))
	})
	// An attacker prepends n forged entries: the walk stops at the client,
	// so the cost does not grow with n.
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("forged-%d", n), func(b *testing.B) {
			benchKey(b, xff.Key, newReq(b, lbPeer, "X-Forwarded-For", xffOf(n, "198.51.%d.%d")+", "+clientIP))
		})
	}
	// Worst case: every entry is trusted, so the walk continues until it
	// falls back to the peer: linear up to maxChainWalk (128) elements, then
	// flat, whatever the header length.
	for _, n := range []int{10, 100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("trusted-%d", n), func(b *testing.B) {
			benchKey(b, xff.Key, newReq(b, lbPeer, "X-Forwarded-For", xffOf(n, "10.0.%d.%d")))
		})
	}
}

func BenchmarkHopCount(b *testing.B) {
	hops := must(HopCount(2, trustedProxies...))
	benchKey(b, hops.Key, newReq(b, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP+", 10.0.0.2"))
}

func BenchmarkTrustedHeader(b *testing.B) {
	h := must(TrustedHeader("CF-Connecting-IP", trustedProxies...))
	benchKey(b, h.Key, newReq(b, lbPeer, "CF-Connecting-IP", clientIP))
}

func BenchmarkForwarded(b *testing.B) {
	fwd := must(Forwarded(trustedProxies...))
	b.Run("3hop", func(b *testing.B) {
		benchKey(b, fwd.Key, newReq(b, lbPeer, "Forwarded", `for=`+victimIP+`, for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2`))
	})
	for _, n := range []int{10, 100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("trusted-%d", n), func(b *testing.B) {
			benchKey(b, fwd.Key, newReq(b, lbPeer, "Forwarded", forwardedList(xffOf(n, "10.0.%d.%d"))))
		})
	}
}

func BenchmarkJWT(b *testing.B) {
	for _, f := range families() {
		b.Run(f.method, func(b *testing.B) {
			fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Key: f.verify, Now: fixedNow}))
			benchKey(b, fn, bearer(b, sign(b, f.good, claimsFor("alice"))))
		})
	}
}

func BenchmarkClaimFromContext(b *testing.B) {
	req := withValue(newReq(b, lbPeer), ctxKey("claims"), jwt.MapClaims{"sub": "alice"})
	benchKey(b, ClaimFromContext(ctxKey("claims"), "sub"), req)
}

func BenchmarkAPIKey(b *testing.B) {
	fn := must(APIKey("X-API-Key", "api_key"))
	benchKey(b, fn, newReq(b, lbPeer, "X-API-Key", "sk_live_0123456789abcdef0123456789abcdef"))
}

func BenchmarkUserOrIP(b *testing.B) {
	fn := FirstOf(Tagged("user", ClaimFromContext(ctxKey("claims"), "")), Tagged("ip", must(XForwardedFor(trustedProxies...)).Key))
	anon := newReq(b, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP)
	anon.HTTP().Pattern = "GET /api1"
	b.Run("anonymous", func(b *testing.B) { benchKey(b, fn, anon) })
	user := withValue(anon, ctxKey("claims"), jwt.MapClaims{"sub": "alice"})
	b.Run("user", func(b *testing.B) { benchKey(b, fn, user) })
}

// Baselines from the same run: what a naive limiter does. These are the
// implementations the package replaces, not alternatives to use.
func BenchmarkBaseline(b *testing.B) {
	// net.SplitHostPort + net.ParseIP + String: the usual peer key.
	b.Run("peer-net.ParseIP", func(b *testing.B) {
		fn := func(r Request) (string, error) {
			host, _, err := net.SplitHostPort(r.RemoteAddr())
			if err != nil {
				return "", err
			}
			return net.ParseIP(host).String(), nil
		}
		benchKey(b, fn, newReq(b, "203.0.113.7:51234"))
	})
	// strings.Split of X-Forwarded-For, leftmost entry: spoofable, and it
	// splits the whole header whatever its length.
	leftmost := func(r Request) (string, error) {
		parts := strings.Split(r.Header("X-Forwarded-For"), ",")
		return net.ParseIP(strings.TrimSpace(parts[0])).String(), nil
	}
	b.Run("xff-split-leftmost-3hop", func(b *testing.B) {
		benchKey(b, leftmost, newReq(b, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP+", 10.0.0.2"))
	})
	b.Run("xff-split-leftmost-10000", func(b *testing.B) {
		benchKey(b, leftmost, newReq(b, lbPeer, "X-Forwarded-For", xffOf(10_000, "198.51.%d.%d")+", "+clientIP))
	})
}
