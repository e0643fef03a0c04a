package keyfuncs

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIPv6AddressRotationWithinOneSlash64IsOneKey(t *testing.T) {
	// One subscriber owns a /64 and can send every request from a new
	// address in it. 65,536 of them must share one key.
	rng := rand.New(rand.NewPCG(1, 2))
	base := netip.MustParseAddr("2001:db8:1:2::").As16()
	r := PeerIP()
	keys := map[string]int{}
	for i := 0; i < 1<<16; i++ {
		a := base
		binary.BigEndian.PutUint64(a[8:], rng.Uint64())
		binary.BigEndian.PutUint16(a[14:], uint16(i)) // every low 16-bit value at least once
		k, err := r.Key(newReq(t, netip.AddrPortFrom(netip.AddrFrom16(a), 443).String()))
		require.NoError(t, err)
		keys[k]++
	}
	assert.Equal(t, map[string]int{"2001:db8:1:2::/64": 1 << 16}, keys)
}

func TestDifferentSlash64sDiffer(t *testing.T) {
	r := PeerIP()
	seen := map[string]string{}
	for _, a := range []string{"2001:db8:1:2::1", "2001:db8:1:3::1", "2001:db8:1:2:8000::1", "2001:db8:2:2::1", "2001:db9:1:2::1"} {
		k, err := r.Key(newReq(t, "["+a+"]:1"))
		require.NoError(t, err)
		seen[k] = a
	}
	// 2001:db8:1:2::1 and 2001:db8:1:2:8000::1 share a /64.
	assert.Len(t, seen, 4)
	assert.Contains(t, seen, "2001:db8:1:3::/64")
	assert.Contains(t, seen, "2001:db9:1:2::/64")
}

func TestIPv4MappedIsTheSameKeyAsIPv4(t *testing.T) {
	r := PeerIP()
	for _, remote := range []string{"1.2.3.4:80", "1.2.3.4", "[::ffff:1.2.3.4]:80", "::ffff:1.2.3.4", "[::ffff:102:304]:1", "[::ffff:1.2.3.4%eth0]:1"} {
		k, err := r.Key(newReq(t, remote))
		require.NoError(t, err, remote)
		assert.Equal(t, "1.2.3.4", k, remote)
	}
}

func TestAggregationPrefixes(t *testing.T) {
	tests := []struct {
		v4, v6 int
		addr   string
		want   string
	}{
		{0, 0, "203.0.113.7", "203.0.113.7"},
		{0, 0, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{24, 0, "203.0.113.7", "203.0.113.0/24"},
		{16, 0, "203.0.113.7", "203.0.0.0/16"},
		{32, 56, "2001:db8:1:2ff:3:4:5:6", "2001:db8:1:200::/56"},
		{32, 48, "2001:db8:1:2:3:4:5:6", "2001:db8:1::/48"},
		{32, 128, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"},
		{32, 32, "2001:db8:1:2:3:4:5:6", "2001:db8::/32"},
		{24, 48, "::ffff:203.0.113.7", "203.0.113.0/24"},
	}
	for _, tc := range tests {
		r, err := PeerIP().WithPrefixes(tc.v4, tc.v6)
		require.NoError(t, err)
		got, err := r.Key(newReq(t, tc.addr))
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%+v", tc)

		r2, err := newIPResolver(ipConfig{IPv4Prefix: tc.v4, IPv6Prefix: tc.v6})
		require.NoError(t, err)
		got2, err := r2.Key(newReq(t, tc.addr))
		require.NoError(t, err)
		assert.Equal(t, got, got2, "ipConfig and WithPrefixes agree")
	}
}

func TestWithPrefixesLeavesOriginalUnchanged(t *testing.T) {
	r := PeerIP()
	r48, err := r.WithPrefixes(0, 48)
	require.NoError(t, err)
	k, _ := r.Key(newReq(t, "2001:db8:1:2::1"))
	k48, _ := r48.Key(newReq(t, "2001:db8:1:2::1"))
	assert.Equal(t, "2001:db8:1:2::/64", k)
	assert.Equal(t, "2001:db8:1::/48", k48)
}

func TestDefaults(t *testing.T) {
	assert.Equal(t, 32, defaultIPv4Prefix)
	assert.Equal(t, 64, defaultIPv6Prefix)
	var zero Resolver
	assert.Equal(t, sourcePeer, zero.effectiveSource())
	k, err := zero.Key(newReq(t, "[2001:db8:1:2::9]:1", "X-Forwarded-For", victimIP))
	require.NoError(t, err)
	assert.Equal(t, "2001:db8:1:2::/64", k, "zero value keys the peer at /64")
	k, err = zero.Key(newReq(t, "203.0.113.9:1"))
	require.NoError(t, err)
	assert.Equal(t, "203.0.113.9", k, "zero value keys IPv4 at /32")
	empty, err := newIPResolver(ipConfig{})
	require.NoError(t, err)
	assert.Equal(t, sourcePeer, empty.effectiveSource())
	assert.Equal(t, "keyfuncs.Resolver{source=peer ipv4=/32 ipv6=/64}", empty.String())
	assert.Equal(t, "keyfuncs.Resolver{source=x-forwarded-for trusted=[10.0.0.0/8 fd00::/8] ipv4=/32 ipv6=/64}",
		must(XForwardedFor(trustedProxies...)).String())
	assert.Equal(t, "keyfuncs.Resolver{source=header trusted=[10.0.0.0/8] header=X-Real-Ip ipv4=/32 ipv6=/64}",
		must(TrustedHeader("x-real-ip", "10.0.0.0/8")).String())
	assert.Equal(t, "keyfuncs.Resolver{source=hop-count hops=2 ipv4=/24 ipv6=/48}",
		must(must(HopCount(2)).WithPrefixes(24, 48)).String())
}

func TestConstructionErrors(t *testing.T) {
	tests := []struct {
		name    string
		build   func() (*Resolver, error)
		wantErr string
	}{
		{"xff without proxies", func() (*Resolver, error) { return XForwardedFor() }, "needs at least one trusted proxy"},
		{"forwarded without proxies", func() (*Resolver, error) { return Forwarded() }, "needs at least one trusted proxy"},
		{"header without proxies", func() (*Resolver, error) { return TrustedHeader("X-Real-IP") }, "needs at least one trusted proxy"},
		{"bad cidr", func() (*Resolver, error) { return XForwardedFor("10.0.0.0/33") }, `"10.0.0.0/33" is not a valid CIDR`},
		{"not an ip", func() (*Resolver, error) { return XForwardedFor("proxy.internal") }, "neither a CIDR nor an IP"},
		{"host bits", func() (*Resolver, error) { return XForwardedFor("10.0.0.1/8") }, "write 10.0.0.0/8 for the network or 10.0.0.1/32"},
		{"zone in cidr", func() (*Resolver, error) { return XForwardedFor("fe80::%eth0/64") }, "not a valid CIDR"},
		{"empty header name", func() (*Resolver, error) { return TrustedHeader("", "10.0.0.0/8") }, "valid header name"},
		{"bad header name", func() (*Resolver, error) { return TrustedHeader("X Real IP", "10.0.0.0/8") }, "valid header name"},
		{"zero hops", func() (*Resolver, error) { return HopCount(0) }, "hop count 0 out of range"},
		{"too many hops", func() (*Resolver, error) { return HopCount(65) }, "hop count 65 out of range"},
		{"hops bad cidr", func() (*Resolver, error) { return HopCount(1, "x") }, "neither a CIDR"},
		{"unknown source", func() (*Resolver, error) { return newIPResolver(ipConfig{Source: "x-real-ip"}) }, `unknown IP source "x-real-ip"`},
		{"peer with proxies", func() (*Resolver, error) {
			return newIPResolver(ipConfig{TrustedProxies: []string{"10.0.0.0/8"}})
		}, "trusted proxies have no effect"},
		{"hops on xff", func() (*Resolver, error) {
			return newIPResolver(ipConfig{Source: sourceXForwardedFor, TrustedProxies: trustedProxies, Hops: 2})
		}, "hops is only used by"},
		{"header on xff", func() (*Resolver, error) {
			return newIPResolver(ipConfig{Source: sourceXForwardedFor, TrustedProxies: trustedProxies, Header: "X-Real-IP"})
		}, "header is only used by"},
		{"v4 prefix too short", func() (*Resolver, error) { return PeerIP().WithPrefixes(8, 64) }, "IPv4 prefix /8 out of range"},
		{"v4 prefix too long", func() (*Resolver, error) { return PeerIP().WithPrefixes(33, 64) }, "IPv4 prefix /33"},
		{"v6 prefix too short", func() (*Resolver, error) { return PeerIP().WithPrefixes(32, 16) }, "IPv6 prefix /16 out of range"},
		{"v6 prefix too long", func() (*Resolver, error) { return PeerIP().WithPrefixes(32, 129) }, "IPv6 prefix /129"},
		{"negative prefix", func() (*Resolver, error) { return newIPResolver(ipConfig{IPv6Prefix: -1}) }, "IPv6 prefix /-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.build()
			require.Error(t, err)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.True(t, strings.HasPrefix(err.Error(), "keyfuncs: "), err.Error())
		})
	}
}

func TestTrustedAcceptsBareAddressesAndMappedRanges(t *testing.T) {
	ts, err := parseTrusted([]string{" 10.0.0.1 ", "::ffff:192.168.0.0/112", "fe80::1%eth0", "2001:db8::/32"})
	require.NoError(t, err)
	assert.Equal(t, trustSet{
		netip.MustParsePrefix("10.0.0.1/32"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("fe80::1/128"),
		netip.MustParsePrefix("2001:db8::/32"),
	}, ts)
}

func TestParseHost(t *testing.T) {
	valid := map[string]string{
		"203.0.113.7":             "203.0.113.7",
		"203.0.113.7:0":           "203.0.113.7",
		"203.0.113.7:65535":       "203.0.113.7",
		"2001:db8::1":             "2001:db8::1",
		"[2001:db8::1]":           "2001:db8::1",
		"[2001:db8::1]:443":       "2001:db8::1",
		"2001:DB8:0:0:0:0:0:1":    "2001:db8::1",
		"fe80::1%eth0":            "fe80::1",
		"[fe80::1%eth0]:443":      "fe80::1",
		"::ffff:203.0.113.7":      "203.0.113.7",
		"[::ffff:203.0.113.7]:80": "203.0.113.7",
		"::":                      "::",
		"0.0.0.0":                 "0.0.0.0",
	}
	for in, want := range valid {
		a, ok := parseIP(in)
		require.True(t, ok, in)
		assert.Equal(t, want, a.String(), in)
		assert.Empty(t, a.Zone(), in)
		assert.False(t, a.Is4In6(), in)
	}
	for _, in := range append(garbage, "", "[2001:db8::1]443", "[2001:db8::1]:", "[2001:db8::1]:65536",
		"203.0.113.7:65536", "203.0.113.7:+80", "2001:db8::1]", "[203.0.113.7]:80", "1.2.3.4:80:80",
		"::1:80:", "[[::1]]", "[::1]:80]", strings.Repeat("1", maxHostLen+1), "[fe80::1%"+strings.Repeat("z", 100)+"]") {
		_, ok := parseIP(in)
		assert.False(t, ok, "%q", in)
	}
}
