package keyfuncs

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// exactKeys resolves with /32 and /128 prefixes so that a key is exactly
// the address it came from.
func exactKeys(tb testing.TB, r *Resolver) *Resolver {
	tb.Helper()
	e, err := r.WithPrefixes(32, 128)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// checkNormalisedKey fails unless key is an address in normal form (no
// zone, not IPv4-mapped, canonical text) or a masked prefix of one.
func checkNormalisedKey(t *testing.T, key string) {
	t.Helper()
	if strings.Contains(key, "/") {
		p, err := netip.ParsePrefix(key)
		if err != nil || p != p.Masked() || p.Addr().Is4In6() || p.String() != key {
			t.Fatalf("key %q is not a normalised prefix", key)
		}
		return
	}
	a, err := netip.ParseAddr(key)
	if err != nil || a.Zone() != "" || a.Is4In6() || a.String() != key {
		t.Fatalf("key %q is not a normalised address", key)
	}
}

var fuzzHeaderSeeds = []string{
	"", victimIP + ", " + clientIP, victimIP + ", garbage, 10.0.0.2", "::ffff:10.0.0.2",
	"2001:db8:1:2::7%eth0, fd00::2%eth1", "[2001:db8::1]:443, 1.2.3.4:80", ",,,", " , \t,",
	"10.0.0.3, 10.0.0.2", "1.2.3.4\n5.6.7.8, 10.0.0.9", "unknown", "[::1", "1.2.3.4:99999",
}

var fuzzPeerSeeds = []string{lbPeer, "[::ffff:10.0.0.1]:1", "[fd00::1%eth0]:1", "198.51.100.50:1", "", "@", "10.0.0.1"}

// FuzzXFF: never panics; the key is normalised; it is the peer or an
// address that appears in the header, and never a trusted proxy unless it
// is the peer itself.
func FuzzXFF(f *testing.F) {
	for i, h := range fuzzHeaderSeeds {
		f.Add(h, fuzzPeerSeeds[i%len(fuzzPeerSeeds)])
	}
	xff := must(XForwardedFor(trustedProxies...))
	hops := must(HopCount(2, trustedProxies...))
	exactXFF, exactHops := exactKeys(f, xff), exactKeys(f, hops)
	f.Fuzz(func(t *testing.T, header, peer string) {
		lines := strings.Split(header, "\n")
		var hdr []string
		candidates := map[string]bool{}
		for _, l := range lines {
			hdr = append(hdr, "X-Forwarded-For", l)
			for _, e := range strings.Split(l, ",") {
				if a, ok := parseIP(trimOWS(e)); ok {
					candidates[a.String()] = true
				}
			}
		}
		req := newReq(t, peer, hdr...)
		peerAddr, peerOK := parseIP(peer)
		for _, r := range []*Resolver{xff, hops} {
			k, err := r.Key(req)
			if !peerOK {
				if !errors.Is(err, ErrNoKey) {
					t.Fatalf("unparseable peer %q: err %v, key %q", peer, err, k)
				}
				continue
			}
			if err != nil {
				t.Fatalf("peer %q: %v", peer, err)
			}
			checkNormalisedKey(t, k)
		}
		if !peerOK {
			return
		}
		for _, r := range []*Resolver{exactXFF, exactHops} {
			k, _ := r.Key(req)
			if k == peerAddr.String() {
				continue
			}
			if !candidates[k] {
				t.Fatalf("%v: key %q is neither the peer %q nor an entry of %q", r, k, peer, header)
			}
			if r == exactXFF && xff.trusted.contains(netip.MustParseAddr(k)) {
				t.Fatalf("key %q is a trusted proxy", k)
			}
		}
	})
}

// FuzzForwarded: never panics; the key is normalised; it is the peer or an
// untrusted address that the header spells out.
func FuzzForwarded(f *testing.F) {
	for i, h := range []string{
		"", `for=192.0.2.60;proto=http;by=203.0.113.43`, `For="[2001:db8:cafe::17]:4711"`,
		`for=` + victimIP + `, for=_hidden`, `for=unknown`, `for="192.0.2.60:_abc"`, `for=1.2.3.4;for=5.6.7.8`,
		`for=1.2.3.4, for=10.0.0.2;ext="a,b"`, `for="[::ffff:10.0.0.2]", for=10.0.0.3`, `for="\"`, `"`, `for=1.2.3.4` + "\n" + `for=10.0.0.9`,
	} {
		f.Add(h, fuzzPeerSeeds[i%len(fuzzPeerSeeds)])
	}
	fwd := must(Forwarded(trustedProxies...))
	exact := exactKeys(f, fwd)
	f.Fuzz(func(t *testing.T, header, peer string) {
		var hdr []string
		for _, l := range strings.Split(header, "\n") {
			hdr = append(hdr, "Forwarded", l)
		}
		req := newReq(t, peer, hdr...)
		peerAddr, peerOK := parseIP(peer)
		k, err := fwd.Key(req)
		if !peerOK {
			if !errors.Is(err, ErrNoKey) {
				t.Fatalf("unparseable peer %q: err %v", peer, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		checkNormalisedKey(t, k)
		ek, _ := exact.Key(req)
		if ek == peerAddr.String() {
			return
		}
		a := netip.MustParseAddr(ek)
		if fwd.trusted.contains(a) {
			t.Fatalf("key %q is a trusted proxy", ek)
		}
		if !strings.Contains(strings.ToLower(header), "for=") {
			t.Fatalf("key %q from a header without for=: %q", ek, header)
		}
	})
}

// FuzzParseIP: never panics; a parsed address is normalised and its key
// renders and parses back to the same prefix.
func FuzzParseIP(f *testing.F) {
	for _, s := range append(garbage, "203.0.113.7", "203.0.113.7:443", "[2001:db8::1]:443", "fe80::1%eth0",
		"[fe80::1%eth0]:1", "::ffff:1.2.3.4", "::", "[::]:0", "1.2.3.4:65535") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseIP(s)
		if !ok {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("parseIP(%q) = %v is not normalised", s, a)
		}
		if b, ok := parseIP(a.String()); !ok || b != a {
			t.Fatalf("parseIP(%q) = %v does not round-trip (%v, %v)", s, a, b, ok)
		}
		for _, bits := range [][2]int{{32, 64}, {24, 48}, {32, 128}, {16, 32}} {
			p := aggregate(a, bits[0], bits[1])
			k := prefixKey(p)
			checkNormalisedKey(t, k)
			var back netip.Prefix
			if strings.Contains(k, "/") {
				back = netip.MustParsePrefix(k)
			} else {
				back = netip.PrefixFrom(netip.MustParseAddr(k), a.BitLen())
			}
			if back != p || !p.Contains(a) {
				t.Fatalf("key %q of %v does not round-trip to %v", k, a, p)
			}
		}
	})
}

// FuzzQuery: queryValue agrees with url.ParseQuery(raw).Get(name).
func FuzzQuery(f *testing.F) {
	f.Add("a=1&a=2", "a")
	f.Add("a%3D=1;&a=x+y", "a=")
	f.Add("%zz=1&b=%41", "b")
	f.Fuzz(func(t *testing.T, raw, name string) {
		v, _ := url.ParseQuery(raw)
		if got, want := queryValue(raw, name), v.Get(name); got != want {
			t.Fatalf("queryValue(%q, %q) = %q, url.Values says %q", raw, name, got, want)
		}
	})
}

// FuzzJoin: Join is injective (its output decodes to its input).
func FuzzJoin(f *testing.F) {
	f.Add("a:b", "c", "")
	f.Add("1:a,", ",", "9:")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		for _, parts := range [][]string{{a}, {a, b}, {a, b, c}} {
			got, ok := splitJoin(Join(parts...))
			if !ok || len(got) != len(parts) {
				t.Fatalf("Join(%q) does not decode: %q", parts, got)
			}
			for i := range parts {
				if got[i] != parts[i] {
					t.Fatalf("Join(%q) decodes to %q", parts, got)
				}
			}
		}
	})
}
