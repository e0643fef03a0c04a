package keyfuncs

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nestedClaims is the JSON of claims with sub and exp and one claim
// nested depth levels deep.
func nestedClaims(depth int) string {
	return `{"sub":"victim","exp":` + strconv.FormatInt(fixedTime.Unix()+3600, 10) + `,"x":` + strings.Repeat(`[`, depth-1) + strings.Repeat(`]`, depth-1) + `}`
}

// signRaw signs the header and the raw claims JSON with s.
func signRaw(tb testing.TB, s signer, claimsJSON string) string {
	tb.Helper()
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + s.method.Alg() + `","typ":"JWT"}`))
	p := base64.RawURLEncoding.EncodeToString([]byte(claimsJSON))
	sig, err := s.method.Sign(h+"."+p, s.key)
	require.NoError(tb, err)
	return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// hostileToken is the worst token the default size bound lets through:
// just under 8 KiB, claims nested as deep as the bytes allow, signed with
// the wrong key.
func hostileToken(tb testing.TB, s signer) string {
	depth := 2900 // 5,800 bytes of brackets: 7.8 KiB once encoded
	tok := signRaw(tb, s, nestedClaims(depth))
	require.LessOrEqual(tb, len(tok), defaultMaxTokenBytes)
	return tok
}

// TestJWTSignatureBeforeClaims (issue 22): a token whose signature fails
// is rejected as a bad signature without its claims being decoded, even
// when they are not JSON at all, and the Keyfunc sees no claims.
func TestJWTSignatureBeforeClaims(t *testing.T) {
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			var sawClaims int
			fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Now: fixedNow,
				Keyfunc: func(tok *jwt.Token) (any, error) {
					if m, _ := tok.Claims.(jwt.MapClaims); len(m) != 0 {
						sawClaims++
					}
					return f.verify, nil
				}}))
			for _, claims := range []string{`{{{{not json`, nestedClaims(2000), `{"sub":"victim"}`} {
				_, err := fn(bearer(t, signRaw(t, f.wrong, claims)))
				require.ErrorIs(t, err, jwt.ErrTokenSignatureInvalid, "%.40s", claims)
				assert.NotErrorIs(t, err, jwt.ErrTokenMalformed)
			}
			_, err := fn(bearer(t, hostileToken(t, f.wrong)))
			require.ErrorIs(t, err, jwt.ErrTokenSignatureInvalid)
			k, err := fn(bearer(t, sign(t, f.good, claimsFor("alice"))))
			require.NoError(t, err)
			assert.Equal(t, "alice", k)
			assert.Zero(t, sawClaims, "the Keyfunc runs before the claims are decoded")
		})
	}
}

// TestJWTNestingBound (issue 22): even a validly signed token's claims
// and any token's header are refused past maxJWTDepth levels of nesting;
// at the bound they are read.
func TestJWTNestingBound(t *testing.T) {
	fn := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow}))
	k, err := fn(bearer(t, signRaw(t, jwtSigningHS256(), nestedClaims(maxJWTDepth))))
	require.NoError(t, err)
	assert.Equal(t, "victim", k)
	_, err = fn(bearer(t, signRaw(t, jwtSigningHS256(), nestedClaims(maxJWTDepth+1))))
	require.ErrorIs(t, err, errJWTDepth)

	deepHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","x":` + strings.Repeat("[", maxJWTDepth) + strings.Repeat("]", maxJWTDepth) + `}`))
	_, err = fn(bearer(t, deepHeader+".e30.c2ln"))
	require.ErrorIs(t, err, errJWTDepth)
	_, err = fn(bearer(t, strings.Repeat("a", maxJWTHeaderBytes+1)+".e30.c2ln"))
	require.ErrorIs(t, err, errJWTHeaderLen)
	for _, tok := range []string{"a.b", "a.b.c.d", "!!.e30.c2ln"} {
		_, err = fn(bearer(t, tok))
		require.ErrorIs(t, err, jwt.ErrTokenMalformed, tok)
	}
}

func TestJSONDepth(t *testing.T) {
	for in, want := range map[string]int{
		``: 0, `1`: 0, `{}`: 1, `{"a":[1,{"b":[]}]}`: 4, `{"a":"[[[{{{"}`: 1,
		`{"a":"\"[[["}`: 1, `{"a":"\\","b":[[]]}`: 3, `["\\\"[["]`: 1,
	} {
		assert.Equal(t, want, jsonDepth([]byte(in)), in)
	}
}

// BenchmarkJWTHostile (issue 22): the worst token the size bound admits
// (7.8 KiB, nested claims, bad signature) against no token, a flat valid
// token and a flat token of the same size with a bad signature: the
// hostile one costs one signature check over its bytes, as the flat one
// of its size does, and no claims decoding.
func BenchmarkJWTHostile(b *testing.B) {
	for _, f := range families()[:2] {
		fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Key: f.verify, Now: fixedNow}))
		run := func(name string, req Request, wantErr bool) {
			b.Run(f.method+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := fn(req); (err != nil) != wantErr {
						b.Fatal(err)
					}
				}
			})
		}
		run("no-token", newReq(b, lbPeer), true)
		run("flat", bearer(b, sign(b, f.good, claimsFor("alice"))), false)
		run("flat-8k-badsig", bearer(b, signRaw(b, f.wrong, `{"sub":"victim","pad":"`+strings.Repeat("x", 5700)+`"}`)), true)
		run("hostile-8k-nested-badsig", bearer(b, hostileToken(b, f.wrong)), true)
		run("hostile-1k-header-badsig", bearer(b, bigHeaderToken(b)), true)
	}
}

// bigHeaderToken is a token whose header is as large as the bound
// admits and full of nested members (the header is decoded before the
// signature is checked), with nested claims and a bad signature.
func bigHeaderToken(tb testing.TB) string {
	var sb strings.Builder
	sb.WriteString(`{"alg":"RS256"`)
	for i := 0; sb.Len() < maxJWTHeaderBytes*3/4-20; i++ {
		sb.WriteString(`,"k` + strconv.Itoa(i) + `":[1,{"a":"b"}]`)
	}
	sb.WriteString(`}`)
	h := base64.RawURLEncoding.EncodeToString([]byte(sb.String()))
	require.LessOrEqual(tb, len(h), maxJWTHeaderBytes)
	return h + "." + base64.RawURLEncoding.EncodeToString([]byte(nestedClaims(2000))) + ".c2lnbmF0dXJl"
}
