package keyfuncs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The spoofing matrix: every trust configuration against every attack. The
// deployment is a client (203.0.113.7) behind one load balancer (10.0.0.1,
// the TCP peer) that appends to X-Forwarded-For and Forwarded and overwrites
// X-Real-IP; the attacker wants to be keyed as the victim (198.51.100.99) or
// as a fresh address.
const (
	clientIP = "203.0.113.7"
	victimIP = "198.51.100.99"
	lbIP     = "10.0.0.1"
	lbPeer   = lbIP + ":40000"
)

var trustedProxies = []string{"10.0.0.0/8", "fd00::/8"}

type deployment struct {
	name string
	r    *Resolver
}

func deployments(t *testing.T) []deployment {
	t.Helper()
	return []deployment{
		{"peer", PeerIP()},
		{"xff", must(XForwardedFor(trustedProxies...))},
		{"hops", must(HopCount(1, trustedProxies...))},
		{"header", must(TrustedHeader("X-Real-IP", trustedProxies...))},
		{"forwarded", must(Forwarded(trustedProxies...))},
	}
}

// runMatrix checks the key of req under every deployment against want (one
// entry per deployment) and that no deployment yields a value in never.
func runMatrix(t *testing.T, req Request, want map[string]string, never ...string) {
	t.Helper()
	deps := deployments(t)
	require.Len(t, want, len(deps), "the matrix must cover every deployment")
	for _, d := range deps {
		t.Run(d.name, func(t *testing.T) {
			got, err := d.r.Key(req)
			require.NoError(t, err)
			assert.Equal(t, want[d.name], got)
			for _, n := range never {
				assert.NotEqual(t, n, got, "attacker-chosen key")
			}
		})
	}
}

// all returns a want map with v for every proxy-aware deployment and the
// load balancer for "peer".
func all(v string) map[string]string {
	return map[string]string{"peer": lbIP, "xff": v, "hops": v, "header": v, "forwarded": v}
}

func TestSpoofedLeftmostXFF(t *testing.T) {
	req := newReq(t, lbPeer,
		"X-Forwarded-For", victimIP+", "+clientIP,
		"X-Real-IP", clientIP,
		"Forwarded", "for="+victimIP+", for="+clientIP)
	runMatrix(t, req, all(clientIP), victimIP)
}

func TestSpoofedLeftmostXFFBehindTwoProxies(t *testing.T) {
	// client -> CDN edge (10.1.0.5) -> LB (10.0.0.1) -> server.
	req := newReq(t, lbPeer,
		"X-Forwarded-For", "1.1.1.1, "+victimIP+", "+clientIP+", 10.1.0.5",
		"Forwarded", "for=1.1.1.1, for="+victimIP+", for="+clientIP+", for=10.1.0.5")
	for _, tc := range []struct {
		name string
		r    *Resolver
	}{
		{"xff", must(XForwardedFor(trustedProxies...))},
		{"hops", must(HopCount(2))},
		{"hops+cidr", must(HopCount(2, trustedProxies...))},
		{"forwarded", must(Forwarded(trustedProxies...))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Key(req)
			require.NoError(t, err)
			assert.Equal(t, clientIP, got)
		})
	}
}

func TestRepeatedXFFHeaders(t *testing.T) {
	// The client sends two X-Forwarded-For lines; the proxy appends to the
	// last one (or adds a line of its own). Lines are merged in order.
	for _, lines := range [][]string{
		{victimIP, "198.51.100.98, " + clientIP},
		{victimIP, "198.51.100.98", clientIP},
		{victimIP + ", 198.51.100.98", "", clientIP},
	} {
		t.Run(strings.Join(lines, "|"), func(t *testing.T) {
			var hdr []string
			for _, l := range lines {
				hdr = append(hdr, "X-Forwarded-For", l)
				hdr = append(hdr, "Forwarded", forwardedList(l))
			}
			// A proxy that adds X-Real-IP instead of replacing it leaves two
			// values: ambiguous, so the header deployment keys by the peer.
			hdr = append(hdr, "X-Real-IP", victimIP, "X-Real-IP", clientIP)
			want := all(clientIP)
			want["header"] = lbIP
			runMatrix(t, newReq(t, lbPeer, hdr...), want, victimIP, "198.51.100.98")
		})
	}
}

// forwardedList turns "a, b" into "for=a, for=b" ("" stays "").
func forwardedList(xff string) string {
	if xff == "" {
		return ""
	}
	parts := strings.Split(xff, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if strings.Contains(p, ":") {
			p = `"[` + p + `]"`
		}
		parts[i] = "for=" + p
	}
	return strings.Join(parts, ", ")
}

func TestV4MappedAliasOfTrustedProxy(t *testing.T) {
	t.Run("peer is the mapped form of a trusted proxy", func(t *testing.T) {
		// A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d. Unless
		// it is folded, the proxy looks untrusted and every client shares
		// its bucket.
		req := newReq(t, "[::ffff:10.0.0.1]:40000",
			"X-Forwarded-For", victimIP+", "+clientIP,
			"X-Real-IP", clientIP,
			"Forwarded", "for="+victimIP+", for="+clientIP)
		runMatrix(t, req, all(clientIP), victimIP, "::ffff:10.0.0.1")
	})
	t.Run("chain holds the mapped form of a trusted proxy", func(t *testing.T) {
		req := newReq(t, lbPeer,
			"X-Forwarded-For", victimIP+", "+clientIP+", ::ffff:10.0.0.2",
			"Forwarded", "for="+victimIP+", for="+clientIP+`, for="[::ffff:10.0.0.2]:80"`)
		for _, d := range deployments(t) {
			if d.name != "xff" && d.name != "forwarded" {
				continue
			}
			got, err := d.r.Key(req)
			require.NoError(t, err)
			assert.Equal(t, clientIP, got, d.name)
		}
	})
	t.Run("trusted range written in mapped form", func(t *testing.T) {
		r := must(XForwardedFor("::ffff:10.0.0.0/104"))
		got, err := r.Key(newReq(t, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP))
		require.NoError(t, err)
		assert.Equal(t, clientIP, got)
	})
	t.Run("mapped client is the same key as the plain one", func(t *testing.T) {
		req := newReq(t, lbPeer,
			"X-Forwarded-For", "::ffff:"+clientIP,
			"X-Real-IP", "::ffff:"+clientIP,
			"Forwarded", `for="[::ffff:`+clientIP+`]"`)
		runMatrix(t, req, all(clientIP))
	})
}

func TestZoneSuffix(t *testing.T) {
	const subnet = "2001:db8:1:2::/64"
	for _, zone := range []string{"%eth0", "%1", "%attacker-rotates-this"} {
		t.Run(zone, func(t *testing.T) {
			addr := "2001:db8:1:2::7" + zone
			req := newReq(t, lbPeer,
				"X-Forwarded-For", victimIP+", "+addr,
				"X-Real-IP", addr,
				"Forwarded", `for=`+victimIP+`, for="[`+addr+`]:4711"`)
			runMatrix(t, req, all(subnet), victimIP)
		})
	}
	t.Run("zoned peer", func(t *testing.T) {
		got, err := PeerIP().Key(newReq(t, "[fe80::1%eth0]:40000"))
		require.NoError(t, err)
		assert.Equal(t, "fe80::/64", got)
	})
	t.Run("zoned trusted proxy", func(t *testing.T) {
		req := newReq(t, "[fd00::1%eth0]:40000",
			"X-Forwarded-For", victimIP+", "+clientIP+", fd00::2%eth1",
			"X-Real-IP", clientIP,
			"Forwarded", "for="+victimIP+", for="+clientIP+`, for="[fd00::2%eth1]"`)
		want := all(clientIP)
		want["peer"] = "fd00::/64"
		want["hops"] = "fd00::/64" // the 1st hop from the right is the inner proxy
		runMatrix(t, req, want, victimIP)
	})
}

var garbage = []string{
	"unknown", "not-an-ip", "1.2.3", "1.2.3.4.5", "01.2.3.4", "0x01020304",
	"[::1", "::1]", "[1.2.3.4]", "1.2.3.4:99999", "1.2.3.4:", "1.2.3.4:x",
	"2001:db8::1:", "_hidden", "<script>", "1.2.3.4 5.6.7.8", "\x00",
	strings.Repeat("9", 200), "fe80::1%", "1.2.3.4%eth0",
}

func TestGarbageMidChain(t *testing.T) {
	for _, g := range garbage {
		t.Run(fmt.Sprintf("%q", g), func(t *testing.T) {
			t.Run("left of the client is never read", func(t *testing.T) {
				req := newReq(t, lbPeer,
					"X-Forwarded-For", victimIP+", "+g+", "+clientIP,
					"X-Real-IP", clientIP,
					"Forwarded", "for="+victimIP+`, for="`+g+`", for=`+clientIP)
				runMatrix(t, req, all(clientIP), victimIP)
			})
			t.Run("in the walked chain it fails closed to the peer", func(t *testing.T) {
				// A trusted hop passed a client-written tail through. Skipping
				// the garbage would land on the victim's address.
				req := newReq(t, lbPeer,
					"X-Forwarded-For", victimIP+", "+g+", 10.0.0.2",
					"X-Real-IP", g,
					"Forwarded", "for="+victimIP+`, for="`+g+`", for=10.0.0.2`)
				want := all(lbIP)
				want["hops"] = "10.0.0.2" // positional: the 1st hop from the right
				runMatrix(t, req, want, victimIP)
			})
		})
	}
}

func TestForwardedUnknownAndObfuscatedFailClosed(t *testing.T) {
	r := must(Forwarded(trustedProxies...))
	for _, node := range []string{"unknown", "UNKNOWN", "_hidden", "_SEVKISEK", `"_x:_y"`, `"[_x]"`, `"unknown:80"`} {
		t.Run(node, func(t *testing.T) {
			got, err := r.Key(newReq(t, lbPeer, "Forwarded", "for="+victimIP+", for="+node))
			require.NoError(t, err)
			assert.Equal(t, lbIP, got)
		})
	}
}

func TestHugeXFF(t *testing.T) {
	const n = 10_000
	forged := make([]string, n)
	trusted := make([]string, n)
	for i := range forged {
		forged[i] = fmt.Sprintf("198.51.%d.%d", i/256%256, i%256)
		trusted[i] = fmt.Sprintf("10.0.%d.%d", i/256%256, i%256)
	}
	t.Run("10,000 forged entries before the client", func(t *testing.T) {
		xff := strings.Join(forged, ", ") + ", " + clientIP
		req := newReq(t, lbPeer,
			"X-Forwarded-For", xff,
			"X-Real-IP", clientIP,
			"Forwarded", forwardedList(xff))
		runMatrix(t, req, all(clientIP), forged...)
	})
	t.Run("10,000 trusted entries fall back to the peer", func(t *testing.T) {
		xff := strings.Join(trusted, ", ")
		req := newReq(t, lbPeer,
			"X-Forwarded-For", xff,
			"X-Real-IP", clientIP,
			"Forwarded", forwardedList(xff))
		want := all(lbIP)
		want["hops"] = trusted[n-1]
		want["header"] = clientIP
		runMatrix(t, req, want)
	})
	t.Run("10,000 garbage entries before the client", func(t *testing.T) {
		xff := strings.Repeat("garbage, ", n) + clientIP
		req := newReq(t, lbPeer,
			"X-Forwarded-For", xff,
			"X-Real-IP", clientIP,
			"Forwarded", strings.Repeat("for=garbage, ", n)+"for="+clientIP)
		runMatrix(t, req, all(clientIP))
	})
}

func TestHeaderFromUntrustedPeer(t *testing.T) {
	// The attacker bypasses the proxy and talks to the server directly.
	const attacker = "198.51.100.50"
	req := newReq(t, attacker+":5555",
		"X-Forwarded-For", victimIP,
		"X-Real-IP", victimIP,
		"CF-Connecting-IP", victimIP,
		"Forwarded", "for="+victimIP)
	want := all(attacker)
	want["peer"] = attacker
	runMatrix(t, req, want, victimIP)

	cf := must(TrustedHeader("CF-Connecting-IP", "173.245.48.0/20"))
	got, err := cf.Key(req)
	require.NoError(t, err)
	assert.Equal(t, attacker, got)
}

func TestHopCountWithoutTrustedCIDRsTrustsAnyPeer(t *testing.T) {
	// Documented caveat: HopCount without CIDRs is only safe when clients
	// cannot reach the server around the proxies. This test pins that the
	// CIDR variant closes the gap.
	req := newReq(t, "198.51.100.50:5555", "X-Forwarded-For", victimIP)
	open := must(HopCount(1))
	got, err := open.Key(req)
	require.NoError(t, err)
	assert.Equal(t, victimIP, got, "without CIDRs the hop count trusts any peer, as documented")

	closed := must(HopCount(1, trustedProxies...))
	got, err = closed.Key(req)
	require.NoError(t, err)
	assert.Equal(t, "198.51.100.50", got)
}

func TestHopCountShortChainFallsBackToPeer(t *testing.T) {
	r := must(HopCount(3))
	got, err := r.Key(newReq(t, lbPeer, "X-Forwarded-For", clientIP+", 10.0.0.2"))
	require.NoError(t, err)
	assert.Equal(t, lbIP, got)

	got, err = r.Key(newReq(t, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP, "X-Forwarded-For", "10.0.0.3, 10.0.0.2"))
	require.NoError(t, err)
	assert.Equal(t, clientIP, got, "repeated lines count as one list")
}

func TestChainOfOnlyTrustedProxies(t *testing.T) {
	req := newReq(t, lbPeer,
		"X-Forwarded-For", "10.0.0.3, 10.0.0.2",
		"X-Real-IP", "10.0.0.3",
		"Forwarded", "for=10.0.0.3, for=10.0.0.2")
	want := all(lbIP)
	want["hops"] = "10.0.0.2"
	want["header"] = "10.0.0.3" // the proxy vouches for it
	runMatrix(t, req, want)
}

func TestNoHeaderFromTrustedPeerIsThePeer(t *testing.T) {
	runMatrix(t, newReq(t, lbPeer), all(lbIP))
}

func TestPeerNotAnIP(t *testing.T) {
	for _, remote := range []string{"", "@", "pipe", "unix:/run/app.sock", "1.2.3.4:99999", "[::1]:x"} {
		for _, d := range deployments(t) {
			_, err := d.r.Key(newReq(t, remote, "X-Forwarded-For", clientIP, "X-Real-IP", clientIP))
			require.Error(t, err, "%s %q", d.name, remote)
			assert.True(t, errors.Is(err, ErrNoKey), "%s %q: %v", d.name, remote, err)
		}
	}
}

func TestXFFEntriesWithPorts(t *testing.T) {
	r := must(XForwardedFor(trustedProxies...))
	for xff, want := range map[string]string{
		victimIP + ", " + clientIP + ":51234":        clientIP,
		victimIP + ", [2001:db8:1:2::7]:443":         "2001:db8:1:2::/64",
		clientIP + ", 10.0.0.2:8080":                 clientIP,
		victimIP + ", \t" + clientIP + " \t":         clientIP,
		victimIP + ",," + clientIP + ",":             clientIP,
		victimIP + ", 2001:db8:1:2::7":               "2001:db8:1:2::/64",
		victimIP + ", 2001:db8:1:2::7:443, 10.0.0.2": "2001:db8:1:2::/64", // parses as an IPv6 address
	} {
		got, err := r.Key(newReq(t, lbPeer, "X-Forwarded-For", xff))
		require.NoError(t, err)
		assert.Equal(t, want, got, xff)
	}
}

func TestChainWalkIsBounded(t *testing.T) {
	chain := func(trusted int, tail string) string {
		parts := []string{victimIP, clientIP}
		for i := 0; i < trusted; i++ {
			parts = append(parts, fmt.Sprintf("10.0.%d.%d", i/256, i%256))
		}
		return strings.Join(parts, ", ") + tail
	}
	xff := must(XForwardedFor(trustedProxies...))
	fwd := must(Forwarded(trustedProxies...))
	for _, tc := range []struct {
		name string
		xff  string
		want string
	}{
		{"client is the last element examined", chain(maxChainWalk-1, ""), clientIP},
		{"client is one past the bound", chain(maxChainWalk, ""), lbIP},
		{"empty elements count", chain(0, strings.Repeat(",", maxChainWalk)), lbIP},
		{"empty elements below the bound", chain(0, strings.Repeat(",", maxChainWalk-1)), clientIP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := xff.Key(newReq(t, lbPeer, "X-Forwarded-For", tc.xff))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got, "xff")
			got, err = fwd.Key(newReq(t, lbPeer, "Forwarded", forwardedList(strings.TrimRight(tc.xff, ","))+strings.Repeat(",", strings.Count(tc.xff, ",")-strings.Count(strings.TrimRight(tc.xff, ","), ","))))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got, "forwarded")
		})
	}
	hops := must(HopCount(2))
	got, err := hops.Key(newReq(t, lbPeer, "X-Forwarded-For", clientIP+strings.Repeat(",", maxChainWalk)+"10.0.0.2"))
	require.NoError(t, err)
	assert.Equal(t, lbIP, got, "hop count walks are bounded too")
}
