package keyfuncs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestForwardedParsing(t *testing.T) {
	r := must(Forwarded(trustedProxies...))
	tests := []struct {
		name   string
		header []string
		want   string
	}{
		{"rfc example ipv4", []string{`for=192.0.2.60;proto=http;by=203.0.113.43`}, "192.0.2.60"},
		{"rfc example quoted ipv6 with port", []string{`For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::/64"},
		{"quoted ipv4", []string{`for="192.0.2.60"`}, "192.0.2.60"},
		{"ipv4 with port", []string{`for="192.0.2.60:8080"`}, "192.0.2.60"},
		{"ipv4 with obfuscated port", []string{`for="192.0.2.60:_abc"`}, "192.0.2.60"},
		{"ipv6 with obfuscated port", []string{`for="[2001:db8::1]:_x.y-z"`}, "2001:db8::/64"},
		{"unquoted ipv6 (lenient proxies)", []string{`for=2001:db8::1`}, "2001:db8::/64"},
		{"unquoted bracketed ipv6", []string{`for=[2001:db8::1]:80`}, "2001:db8::/64"},
		{"for not first", []string{`proto=https;by=10.0.0.1;for=192.0.2.60`}, "192.0.2.60"},
		{"case-insensitive name", []string{`FOR=192.0.2.60`}, "192.0.2.60"},
		{"whitespace", []string{"  for=192.0.2.60 ; proto=https ,\tfor=10.0.0.2  "}, "192.0.2.60"},
		{"walks right to left", []string{`for=` + victimIP + `, for=192.0.2.60, for=10.0.0.2;by=10.0.0.1`}, "192.0.2.60"},
		{"repeated headers", []string{`for=` + victimIP, `for=192.0.2.60`, `for=10.0.0.2`}, "192.0.2.60"},
		{"quoted comma in a trusted element", []string{`for=` + victimIP + `, for=192.0.2.60, for=10.0.0.2;ext="a,b;c"`}, "192.0.2.60"},
		{"empty elements", []string{`for=192.0.2.60,, ,for=10.0.0.2,`}, "192.0.2.60"},
		{"empty header", []string{``}, lbIP},

		// Fail closed to the peer.
		{"obfuscated node", []string{`for=` + victimIP + `, for=_hidden`}, lbIP},
		{"unknown node", []string{`for=` + victimIP + `, for=unknown`}, lbIP},
		{"no for", []string{`for=` + victimIP + `, proto=https;by=10.0.0.2`}, lbIP},
		{"duplicate for", []string{`for=10.0.0.2;for=` + victimIP}, lbIP},
		{"unbalanced quote", []string{`for=` + victimIP + `, for="192.0.2.60`}, lbIP},
		{"quoted-pair", []string{`for=` + victimIP + `, for="192.0.2.\60"`}, lbIP},
		{"unquoted value then junk", []string{`for=` + victimIP + `, for=192.0.2.60 x`}, lbIP},
		{"missing value", []string{`for=` + victimIP + `, for=`}, lbIP},
		{"missing equals", []string{`for=` + victimIP + `, for`}, lbIP},
		{"no name", []string{`for=` + victimIP + `, =192.0.2.60`}, lbIP},
		{"ipv6 port without brackets", []string{`for=` + victimIP + `, for="2001:db8::1:_x"`}, lbIP},
		{"bad obfuscated port", []string{`for=` + victimIP + `, for="192.0.2.60:_"`}, lbIP},
		{"bracket without close", []string{`for=` + victimIP + `, for="[2001:db8::1:_x"`}, lbIP},
		{"ipv4 in brackets", []string{`for=` + victimIP + `, for="[192.0.2.60]"`}, lbIP},
		{"semicolon junk", []string{`for=` + victimIP + `, for=192.0.2.60;;`}, lbIP},
		{"all trusted", []string{`for=10.0.0.3, for=10.0.0.2`}, lbIP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			for _, h := range tc.header {
				hdr = append(hdr, "Forwarded", h)
			}
			got, err := r.Key(newReq(t, lbPeer, hdr...))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.NotEqual(t, victimIP, got)
		})
	}
}

func TestCutLastElement(t *testing.T) {
	rest, elem, ok := cutLastElement(`a=1, b="x,y", c=2`)
	require.True(t, ok)
	assert.Equal(t, `a=1, b="x,y",`, rest)
	assert.Equal(t, ` c=2`, elem)
	rest, elem, ok = cutLastElement(`a=1, b="x,y"`)
	require.True(t, ok)
	assert.Equal(t, `a=1,`, rest)
	assert.Equal(t, ` b="x,y"`, elem)
	rest, elem, ok = cutLastElement(`b="x,y"`)
	require.True(t, ok)
	assert.Equal(t, ``, rest)
	assert.Equal(t, `b="x,y"`, elem)
	_, _, ok = cutLastElement(`a=1, b="x`)
	assert.False(t, ok)
}
