package keyfuncs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	hmacKey   = []byte("0123456789abcdef0123456789abcdef")
	fixedTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
)

func fixedNow() time.Time { return fixedTime }

type testKeys struct {
	rsa, rsa2    *rsa.PrivateKey
	ec, ec2      *ecdsa.PrivateKey
	ed, ed2      ed25519.PrivateKey
	rsaPublicPEM []byte
}

var keys = sync.OnceValue(func() testKeys {
	var k testKeys
	var err error
	for _, p := range []**rsa.PrivateKey{&k.rsa, &k.rsa2} {
		if *p, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	for _, p := range []**ecdsa.PrivateKey{&k.ec, &k.ec2} {
		if *p, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	}
	for _, p := range []*ed25519.PrivateKey{&k.ed, &k.ed2} {
		if _, *p, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	}
	der, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	if err != nil {
		panic(err)
	}
	k.rsaPublicPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return k
})

type signer struct {
	method jwt.SigningMethod
	key    any
}

func jwtSigningHS256() signer { return signer{jwt.SigningMethodHS256, hmacKey} }
func jwtSigningHS256WrongKey() signer {
	return signer{jwt.SigningMethodHS256, []byte("not-the-key-not-the-key-not-the!")}
}

func claimsFor(sub string) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "exp": fixedTime.Add(time.Hour).Unix()}
}

func sign(tb testing.TB, s signer, c jwt.Claims) string {
	tb.Helper()
	tok, err := jwt.NewWithClaims(s.method, c).SignedString(s.key)
	require.NoError(tb, err)
	return tok
}

func bearer(tb testing.TB, tok string) httpRequest {
	return newReq(tb, lbPeer, "Authorization", "Bearer "+tok)
}

// family is one key type: how to sign, how to verify, and a wrong key.
type family struct {
	name   string
	method string
	good   signer
	wrong  signer
	verify any
}

func families() []family {
	k := keys()
	return []family{
		{"HMAC", "HS256", jwtSigningHS256(), jwtSigningHS256WrongKey(), hmacKey},
		{"RSA", "RS256", signer{jwt.SigningMethodRS256, k.rsa}, signer{jwt.SigningMethodRS256, k.rsa2}, &k.rsa.PublicKey},
		{"RSA-PSS", "PS256", signer{jwt.SigningMethodPS256, k.rsa}, signer{jwt.SigningMethodPS256, k.rsa2}, &k.rsa.PublicKey},
		{"ECDSA", "ES256", signer{jwt.SigningMethodES256, k.ec}, signer{jwt.SigningMethodES256, k.ec2}, &k.ec.PublicKey},
		{"EdDSA", "EdDSA", signer{jwt.SigningMethodEdDSA, k.ed}, signer{jwt.SigningMethodEdDSA, k.ed2}, k.ed.Public()},
	}
}

// assertRejected checks that fn refuses req with an error that is not
// ErrNoKey (the token was present) and yields no key.
func assertRejected(t *testing.T, fn Func, req Request) {
	t.Helper()
	k, err := fn(req)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNoKey), "a bad token is not a missing one: %v", err)
	assert.Empty(t, k)
}

func TestJWTEveryKeyFamilyVerifies(t *testing.T) {
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Key: f.verify, Now: fixedNow}))
			k, err := fn(bearer(t, sign(t, f.good, claimsFor("alice"))))
			require.NoError(t, err)
			assert.Equal(t, "alice", k)
		})
	}
}

func TestJWTSignedWithTheWrongKey(t *testing.T) {
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Key: f.verify, Now: fixedNow}))
			assertRejected(t, fn, bearer(t, sign(t, f.wrong, claimsFor("victim"))))
		})
	}
}

func TestJWTForgedSignatureWithVictimSub(t *testing.T) {
	// The attacker holds a valid token for themselves and splices in a
	// payload naming the victim, keeping their own signature.
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Key: f.verify, Now: fixedNow}))
			own := strings.Split(sign(t, f.good, claimsFor("mallory")), ".")
			victim := strings.Split(sign(t, f.wrong, claimsFor("victim")), ".")
			spliced := own[0] + "." + victim[1] + "." + own[2]
			assertRejected(t, fn, bearer(t, spliced))
			// Same payload, signature stripped.
			assertRejected(t, fn, bearer(t, own[0]+"."+victim[1]+"."))
		})
	}
}

func TestJWTAlgNone(t *testing.T) {
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claimsFor("victim")).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	// Hand-made variants: "none" in other cases, empty signature.
	payload := strings.Split(none, ".")[1]
	variants := []string{none}
	for _, alg := range []string{"none", "None", "NONE", "nOnE"} {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `","typ":"JWT"}`))
		variants = append(variants, h+"."+payload+".", h+"."+payload)
	}
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Key: f.verify, Now: fixedNow}))
			for _, v := range variants {
				assertRejected(t, fn, bearer(t, v))
			}
		})
	}
}

func TestJWTExpired(t *testing.T) {
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			fn := must(JWTClaim(JWTConfig{Methods: []string{f.method}, Key: f.verify, Now: fixedNow}))
			expired := jwt.MapClaims{"sub": "victim", "exp": fixedTime.Add(-time.Second).Unix()}
			k, err := fn(bearer(t, sign(t, f.good, expired)))
			assert.ErrorIs(t, err, jwt.ErrTokenExpired)
			assert.False(t, errors.Is(err, ErrNoKey))
			assert.Empty(t, k)
		})
	}
}

func TestJWTExpiryRequiredByDefault(t *testing.T) {
	noExp := sign(t, jwtSigningHS256(), jwt.MapClaims{"sub": "alice"})
	strict := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow}))
	_, err := strict(bearer(t, noExp))
	assert.ErrorIs(t, err, jwt.ErrTokenRequiredClaimMissing)

	lax := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow, AllowMissingExpiry: true}))
	k, err := lax(bearer(t, noExp))
	require.NoError(t, err)
	assert.Equal(t, "alice", k)
	// Even when exp is optional, an expired token is rejected.
	_, err = lax(bearer(t, sign(t, jwtSigningHS256(), jwt.MapClaims{"sub": "alice", "exp": fixedTime.Add(-time.Minute).Unix()})))
	assert.ErrorIs(t, err, jwt.ErrTokenExpired)
}

func TestJWTLeewayAndNotBefore(t *testing.T) {
	justExpired := sign(t, jwtSigningHS256(), jwt.MapClaims{"sub": "alice", "exp": fixedTime.Add(-10 * time.Second).Unix()})
	withLeeway := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow, Leeway: 30 * time.Second}))
	k, err := withLeeway(bearer(t, justExpired))
	require.NoError(t, err)
	assert.Equal(t, "alice", k)

	future := sign(t, jwtSigningHS256(), jwt.MapClaims{"sub": "alice", "exp": fixedTime.Add(2 * time.Hour).Unix(), "nbf": fixedTime.Add(time.Hour).Unix()})
	_, err = withLeeway(bearer(t, future))
	assert.ErrorIs(t, err, jwt.ErrTokenNotValidYet)
}

func TestJWTHSRSKeyConfusion(t *testing.T) {
	// The classic attack: sign HS256 with the server's RSA public key (which
	// is public) as the HMAC secret, hoping the verifier feeds its RSA key
	// bytes to HMAC.
	k := keys()
	forged := sign(t, signer{jwt.SigningMethodHS256, k.rsaPublicPEM}, claimsFor("victim"))

	static := must(JWTClaim(JWTConfig{Methods: []string{"RS256"}, Key: &k.rsa.PublicKey, Now: fixedNow}))
	assertRejected(t, static, bearer(t, forged))

	// Even a careless Keyfunc that hands out the PEM bytes is safe, because
	// the algorithm is pinned before the Keyfunc runs.
	careless := must(JWTClaim(JWTConfig{
		Methods: []string{"RS256"},
		Keyfunc: func(*jwt.Token) (any, error) { return k.rsaPublicPEM, nil },
		Now:     fixedNow,
	}))
	_, err := careless(bearer(t, forged))
	assert.ErrorIs(t, err, jwt.ErrTokenSignatureInvalid)

	// And the configuration that would enable it is refused.
	_, err = JWTClaim(JWTConfig{Methods: []string{"RS256", "HS256"}, Key: &k.rsa.PublicKey})
	assert.EqualError(t, err, "keyfuncs: JWT method HS256 needs the HMAC secret as a []byte JWTConfig.Key, got *rsa.PublicKey")
}

func TestJWTKeyfuncRotation(t *testing.T) {
	k := keys()
	byKid := map[string]any{"a": &k.ec.PublicKey, "b": &k.ec2.PublicKey}
	fn := must(JWTClaim(JWTConfig{
		Methods: []string{"ES256"},
		Keyfunc: func(tok *jwt.Token) (any, error) {
			kid, _ := tok.Header["kid"].(string)
			key, ok := byKid[kid]
			if !ok {
				return nil, errors.New("unknown kid")
			}
			return key, nil
		},
		Now: fixedNow,
	}))
	for kid, priv := range map[string]*ecdsa.PrivateKey{"a": k.ec, "b": k.ec2} {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, claimsFor("alice-"+kid))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(priv)
		require.NoError(t, err)
		got, err := fn(bearer(t, s))
		require.NoError(t, err)
		assert.Equal(t, "alice-"+kid, got)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claimsFor("victim"))
	tok.Header["kid"] = "a"
	s, err := tok.SignedString(k.ec2) // signed by b, claims to be a
	require.NoError(t, err)
	assertRejected(t, fn, bearer(t, s))
}

// TestJWTKeySetVerifiesWithAnyKey: a Keyfunc returning a
// jwt.VerificationKeySet (a JWKS in rotation) accepts a token signed by
// any key of the set, whatever its place, and rejects one signed by
// none of them.
func TestJWTKeySetVerifiesWithAnyKey(t *testing.T) {
	k := keys()
	set := jwt.VerificationKeySet{Keys: []jwt.VerificationKey{&k.ec.PublicKey, &k.ec2.PublicKey}}
	fn := must(JWTClaim(JWTConfig{
		Methods: []string{"ES256"},
		Keyfunc: func(*jwt.Token) (any, error) { return set, nil },
		Now:     fixedNow,
	}))
	for name, priv := range map[string]*ecdsa.PrivateKey{"first": k.ec, "second": k.ec2} {
		s, err := jwt.NewWithClaims(jwt.SigningMethodES256, claimsFor("alice-"+name)).SignedString(priv)
		require.NoError(t, err)
		got, err := fn(bearer(t, s))
		require.NoError(t, err, "signed by the set's %s key", name)
		assert.Equal(t, "alice-"+name, got)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s, err := jwt.NewWithClaims(jwt.SigningMethodES256, claimsFor("victim")).SignedString(other)
	require.NoError(t, err)
	assertRejected(t, fn, bearer(t, s))
	empty := must(JWTClaim(JWTConfig{
		Methods: []string{"ES256"},
		Keyfunc: func(*jwt.Token) (any, error) { return jwt.VerificationKeySet{}, nil },
		Now:     fixedNow,
	}))
	s, err = jwt.NewWithClaims(jwt.SigningMethodES256, claimsFor("alice")).SignedString(k.ec)
	require.NoError(t, err)
	assertRejected(t, empty, bearer(t, s))
}

func TestJWTIssuerAndAudience(t *testing.T) {
	fn := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow, Issuer: "https://auth.example", Audience: "api"}))
	claims := func(iss, aud string) jwt.MapClaims {
		c := claimsFor("alice")
		c["iss"], c["aud"] = iss, aud
		return c
	}
	k, err := fn(bearer(t, sign(t, jwtSigningHS256(), claims("https://auth.example", "api"))))
	require.NoError(t, err)
	assert.Equal(t, "alice", k)
	assertRejected(t, fn, bearer(t, sign(t, jwtSigningHS256(), claims("https://evil.example", "api"))))
	assertRejected(t, fn, bearer(t, sign(t, jwtSigningHS256(), claims("https://auth.example", "other"))))
}

func TestJWTTokenLookup(t *testing.T) {
	fn := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow}))
	tok := sign(t, jwtSigningHS256(), claimsFor("alice"))
	for _, v := range []string{"Bearer " + tok, "bearer " + tok, "BEARER\t" + tok, "  Bearer   " + tok + "  "} {
		k, err := fn(newReq(t, lbPeer, "Authorization", v))
		require.NoError(t, err, v)
		assert.Equal(t, "alice", k)
	}
	for _, v := range []string{"", "Bearer", "Bearer ", "Basic YWxpY2U6cHc=", "Bearer" + tok, "Token " + tok, tok} {
		_, err := fn(newReq(t, lbPeer, "Authorization", v))
		assert.ErrorIs(t, err, ErrNoKey, "%q", v)
	}
	_, err := fn(newReq(t, lbPeer))
	assert.ErrorIs(t, err, ErrNoKey)
	_, err = fn(newReq(t, lbPeer, "Authorization", "Bearer "+strings.Repeat("a", defaultMaxTokenBytes+1)))
	assert.ErrorIs(t, err, errTooLong)
	assertRejected(t, fn, newReq(t, lbPeer, "Authorization", "Bearer not.a.jwt"))

	custom := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow, Header: "X-Auth-Token", MaxTokenBytes: 64}))
	_, err = custom(newReq(t, lbPeer, "X-Auth-Token", tok))
	assert.ErrorIs(t, err, errTooLong, "the token is over 64 bytes")
	custom = must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow, Header: "X-Auth-Token"}))
	k, err := custom(newReq(t, lbPeer, "X-Auth-Token", tok))
	require.NoError(t, err)
	assert.Equal(t, "alice", k)
}

func TestJWTClaimValues(t *testing.T) {
	fn := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow}))
	tenant := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow, Claim: "tenant"}))
	c := func(kv ...any) string {
		m := jwt.MapClaims{"exp": fixedTime.Add(time.Hour).Unix()}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return sign(t, jwtSigningHS256(), m)
	}
	k, err := fn(bearer(t, c("sub", 9007199254740993))) // above 2^53: exact only as json.Number
	require.NoError(t, err)
	assert.Equal(t, "9007199254740993", k)
	k, err = tenant(bearer(t, c("sub", "alice", "tenant", "acme")))
	require.NoError(t, err)
	assert.Equal(t, "acme", k)
	long := strings.Repeat("u", 500)
	k, err = fn(bearer(t, c("sub", long)))
	require.NoError(t, err)
	assert.Equal(t, Bound(long), k, "long claims are hashed")

	_, err = fn(bearer(t, c("tenant", "acme")))
	assert.ErrorIs(t, err, ErrNoKey, "a verified token without the claim has no key")
	_, err = fn(bearer(t, c("sub", "")))
	assert.ErrorIs(t, err, ErrNoKey)
	assertRejected(t, fn, bearer(t, c("sub", map[string]any{"id": 1})))
	assertRejected(t, fn, bearer(t, c("sub", true)))
}

func TestJWTConstructionErrors(t *testing.T) {
	k := keys()
	tests := []struct {
		name string
		cfg  JWTConfig
		want string
	}{
		{"no methods", JWTConfig{Key: hmacKey}, "Methods is empty"},
		{"none", JWTConfig{Methods: []string{"none"}, Key: hmacKey}, `contains "none"`},
		{"unknown method", JWTConfig{Methods: []string{"HS999"}, Key: hmacKey}, `unknown JWT signing method "HS999"`},
		{"no key", JWTConfig{Methods: []string{"HS256"}}, "exactly one of"},
		{"two keys", JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Keyfunc: func(*jwt.Token) (any, error) { return hmacKey, nil }}, "exactly one of"},
		{"empty hmac", JWTConfig{Methods: []string{"HS256"}, Key: []byte{}}, "keyfuncs: JWT method HS256: the key is empty"},
		// an unset environment variable: []byte(os.Getenv("JWT_SECRET"))
		{"unset hmac variable", JWTConfig{Methods: []string{"HS256"}, Key: []byte(os.Getenv("LIMITKIT_TEST_UNSET_VARIABLE"))}, "the key is empty"},
		{"nil hmac slice", JWTConfig{Methods: []string{"HS512"}, Key: []byte(nil)}, "keyfuncs: JWT method HS512: the key is empty"},
		{"rsa private for RS256", JWTConfig{Methods: []string{"RS256"}, Key: k.rsa}, "needs an *rsa.PublicKey JWTConfig.Key, got *rsa.PrivateKey"},
		{"string hmac", JWTConfig{Methods: []string{"HS256"}, Key: "secret"}, "needs the HMAC secret as a []byte JWTConfig.Key, got string"},
		{"ecdsa for EdDSA", JWTConfig{Methods: []string{"EdDSA"}, Key: &k.ec.PublicKey}, "ed25519.PublicKey"},
		{"rsa for ES256", JWTConfig{Methods: []string{"ES256"}, Key: &k.rsa.PublicKey}, "*ecdsa.PublicKey"},
		{"ES256 with a P-384 key", JWTConfig{Methods: []string{"ES256"}, Key: p384()}, "curve P-256"},
		{"nil rsa key", JWTConfig{Methods: []string{"RS256"}, Key: (*rsa.PublicKey)(nil)}, "the key is a nil *rsa.PublicKey"},
		{"short ed25519 key", JWTConfig{Methods: []string{"EdDSA"}, Key: ed25519.PublicKey{1, 2}}, "the ed25519.PublicKey has 2 bytes, want 32"},
		{"empty ed25519 key", JWTConfig{Methods: []string{"EdDSA"}, Key: ed25519.PublicKey{}}, "JWT method EdDSA: the key is empty"},
		{"negative max", JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, MaxTokenBytes: -1}, "MaxTokenBytes"},
		{"negative leeway", JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Leeway: -time.Second}, "Leeway"},
		{"bad header", JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Header: "Auth Header"}, "not a valid header name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := JWTClaim(tc.cfg)
			assert.Nil(t, fn)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestClaimFromContext(t *testing.T) {
	const key = ctxKey("claims")
	fn := ClaimFromContext(key, "")
	tenant := ClaimFromContext(key, "tenant")
	base := newReq(t, lbPeer)
	valid := &jwt.Token{Valid: true, Claims: jwt.MapClaims{"sub": "alice"}}
	unverified := &jwt.Token{Valid: false, Claims: jwt.MapClaims{"sub": "victim"}}

	tests := []struct {
		name    string
		fn      Func
		val     any
		want    string
		noKey   bool
		wantErr string
	}{
		{"map claims", fn, jwt.MapClaims{"sub": "alice"}, "alice", false, ""},
		{"plain map", fn, map[string]any{"sub": "alice"}, "alice", false, ""},
		{"numeric sub", fn, map[string]any{"sub": float64(42)}, "42", false, ""},
		{"other claim", tenant, jwt.MapClaims{"sub": "alice", "tenant": "acme"}, "acme", false, ""},
		{"verified token", fn, valid, "alice", false, ""},
		{"registered claims", fn, &jwt.RegisteredClaims{Subject: "alice"}, "alice", false, ""},
		{"registered claims value", fn, jwt.RegisteredClaims{Subject: "alice"}, "alice", false, ""},
		{"no value", fn, nil, "", true, ""},
		{"no claim", tenant, jwt.MapClaims{"sub": "alice"}, "", true, ""},
		{"empty subject", fn, &jwt.RegisteredClaims{}, "", true, ""},
		{"nil token", fn, (*jwt.Token)(nil), "", true, ""},
		{"unverified token", fn, unverified, "", false, "not verified"},
		{"custom claim on registered", tenant, &jwt.RegisteredClaims{Subject: "alice"}, "", false, "cannot be read from"},
		{"typed nil claims", fn, (*jwt.RegisteredClaims)(nil), "", false, "panicked"},
		{"unsupported type", fn, "alice", "", false, "unsupported claims type string"},
		{"object claim", fn, jwt.MapClaims{"sub": []any{"a"}}, "", false, "not a string or number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := base
			if tc.val != nil {
				req = withValue(base, key, tc.val)
			}
			got, err := tc.fn(req)
			assert.Equal(t, tc.want, got)
			switch {
			case tc.noKey:
				assert.ErrorIs(t, err, ErrNoKey)
			case tc.wantErr != "":
				assert.ErrorContains(t, err, tc.wantErr)
				assert.False(t, errors.Is(err, ErrNoKey))
			default:
				assert.NoError(t, err)
			}
		})
	}
	_, err := fn(withValue(base, key, unverified))
	assert.ErrorIs(t, err, errUnverified)
}

type stringer struct{ s string }

func (s *stringer) String() string { return s.s }

func TestContextValue(t *testing.T) {
	const key = ctxKey("user")
	fn := ContextValue(key)
	base := newReq(t, lbPeer)
	for val, want := range map[any]string{
		"alice":                      "alice",
		42:                           "42",
		int64(-7):                    "-7",
		uint64(18446744073709551615): "18446744073709551615",
		&stringer{"bob"}:             "bob",
		strings.Repeat("x", 100):     Bound(strings.Repeat("x", 100)),
	} {
		got, err := fn(withValue(base, key, val))
		require.NoError(t, err, "%v", val)
		assert.Equal(t, want, got)
	}
	for _, val := range []any{nil, ""} {
		_, err := fn(withValue(base, key, val))
		assert.ErrorIs(t, err, ErrNoKey)
	}
	_, err := fn(withValue(base, key, 1.5))
	assert.ErrorContains(t, err, "float64")
	_, err = fn(withValue(base, key, (*stringer)(nil)))
	assert.ErrorContains(t, err, "panicked", "a nil Stringer is an error, not a panic")
}

func p384() *ecdsa.PublicKey {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &k.PublicKey
}
