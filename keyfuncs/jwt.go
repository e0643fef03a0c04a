package keyfuncs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// defaultClaim is the claim [JWTClaim] and [ClaimFromContext] read when none
// is named: the subject, the principal the token is about.
const defaultClaim = "sub"

// defaultMaxTokenBytes bounds the size of a token [JWTClaim] will parse.
const defaultMaxTokenBytes = 8 << 10

// JWTConfig configures [JWTClaim], which verifies a JSON Web Token with
// github.com/golang-jwt/jwt/v5 and keys the request by one of its claims.
type JWTConfig struct {
	// Methods pins the accepted signing algorithms ("RS256", "PS256",
	// "ES256", "EdDSA", "HS256", ...): a token whose header names another
	// algorithm is rejected before any key is looked up, which defeats
	// alg=none and HS/RS key confusion. Required; "none" is refused.
	Methods []string
	// Key verifies signatures: []byte for HS*, *rsa.PublicKey for RS* and
	// PS*, *ecdsa.PublicKey for ES*, ed25519.PublicKey for EdDSA. Its type
	// must suit every method in Methods. Exactly one of Key and Keyfunc.
	Key any
	// Keyfunc looks up the key per token (key rotation, JWKS). Exactly one
	// of Key and Keyfunc. It is called only for tokens whose algorithm is in
	// Methods, and must return a key whose type suits that algorithm (or a
	// jwt.VerificationKeySet). It runs before the signature is checked and
	// before the claims are decoded: it sees the token's header (kid,
	// alg), and the token's Claims is an empty jwt.MapClaims.
	Keyfunc jwt.Keyfunc
	// Claim is the claim to key by. Default (""): "sub".
	Claim string
	// Header is the header carrying the token. Default (""):
	// "Authorization", where the value must be "Bearer <token>" (scheme in
	// any case); any other header carries the bare token.
	Header string
	// Issuer, when set, must equal the token's iss claim.
	Issuer string
	// Audience, when set, must be one of the token's aud values.
	Audience string
	// Leeway tolerates clock skew when checking exp, nbf and iat. Default: 0.
	Leeway time.Duration
	// AllowMissingExpiry accepts tokens without an exp claim. Default
	// (false): exp is required, so a leaked token cannot be a quota identity
	// forever; an expired token is always rejected.
	AllowMissingExpiry bool
	// MaxTokenBytes bounds the token size; a longer token is an error
	// and is not parsed. Default (0): 8 KiB.
	MaxTokenBytes int
	// Now is the clock for exp/nbf checks. Default (nil): time.Now.
	Now func() time.Time
}

// JWTClaim verifies the request's JSON Web Token and keys the request by the
// configured claim (default "sub"), passed through [Bound]. It returns:
//   - [ErrNoKey] (wrapped) when there is no token (no header, another scheme
//     such as Basic, an empty token) or the verified token lacks the claim;
//   - another error when a token is present but is not valid: wrong key or
//     forged signature, an algorithm outside Methods (alg=none, HS256 signed
//     with an RSA public key), expired or not yet valid, missing exp (unless
//     AllowMissingExpiry), wrong issuer or audience, over MaxTokenBytes, or a
//     claim that is not a string or number.
//
// An invalid token never yields its claimed identity: a forged token naming a
// victim cannot spend the victim's quota. The signature over header.payload
// is checked before the claims are decoded, and the header (at most 1 KiB)
// and claims may nest at most 16 levels, so a forged or hostile token
// costs one signature check, as a valid one does (BenchmarkJWTHostile). Safe for: any deployment, before
// or after authentication; it costs one signature verification per request
// (see the benchmarks), so behind an auth middleware that already verified
// the token prefer [ClaimFromContext]. Construction fails on a missing or
// mismatched key, no methods, or "none".
func JWTClaim(cfg JWTConfig) (Func, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	claim := cfg.Claim
	if claim == "" {
		claim = defaultClaim
	}
	header := cfg.Header
	if header == "" {
		header = "Authorization"
	}
	bearer := strings.EqualFold(header, "Authorization")
	maxLen := cfg.MaxTokenBytes
	if maxLen == 0 {
		maxLen = defaultMaxTokenBytes
	}
	v := newJWTVerifier(&cfg)
	return func(r Request) (string, error) {
		tok := trimOWS(r.Header(header))
		if bearer {
			var ok bool
			if tok, ok = cutBearer(tok); !ok {
				return "", errNoToken
			}
		}
		if tok == "" {
			return "", errNoToken
		}
		if len(tok) > maxLen {
			return "", errTokenTooLong
		}
		claims, err := v.verify(tok)
		if err != nil {
			return "", fmt.Errorf("keyfuncs: JWT rejected: %w", err)
		}
		return claimKey(claims, claim)
	}, nil
}

// check reports the first mistake in cfg: no methods, "none" or an
// unknown method, not exactly one of Key and Keyfunc, a key that cannot
// verify a method, a negative bound or leeway, an invalid header name.
func (cfg *JWTConfig) check() error {
	if len(cfg.Methods) == 0 {
		return errors.New("keyfuncs: JWTConfig.Methods is empty: pin the algorithms your issuer signs with, e.g. []string{\"RS256\"}")
	}
	if (cfg.Key == nil) == (cfg.Keyfunc == nil) {
		return errors.New("keyfuncs: set exactly one of JWTConfig.Key and JWTConfig.Keyfunc")
	}
	for _, m := range cfg.Methods {
		if strings.EqualFold(m, "none") {
			return errors.New("keyfuncs: JWTConfig.Methods contains \"none\": unsigned tokens can never identify a client")
		}
		if jwt.GetSigningMethod(m) == nil {
			return fmt.Errorf("keyfuncs: unknown JWT signing method %q", m)
		}
		if cfg.Key != nil {
			if err := checkKeyType(m, cfg.Key); err != nil {
				return err
			}
		}
	}
	if cfg.MaxTokenBytes < 0 {
		return fmt.Errorf("keyfuncs: JWTConfig.MaxTokenBytes is %d: use 0 for the default or a positive bound", cfg.MaxTokenBytes)
	}
	if cfg.Leeway < 0 {
		return fmt.Errorf("keyfuncs: JWTConfig.Leeway is negative (%v)", cfg.Leeway)
	}
	if cfg.Header != "" && !isToken(cfg.Header) {
		return fmt.Errorf("keyfuncs: JWTConfig.Header %q is not a valid header name", cfg.Header)
	}
	return nil
}

// newJWTVerifier builds the verifier of a checked cfg. It is read-only
// after construction: safe for concurrent use.
func newJWTVerifier(cfg *JWTConfig) *jwtVerifier {
	opts := []jwt.ParserOption{
		jwt.WithLeeway(cfg.Leeway),
	}
	if !cfg.AllowMissingExpiry {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	if cfg.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(cfg.Now))
	}
	v := &jwtVerifier{validator: jwt.NewValidator(opts...), key: cfg.Key, keyfunc: cfg.Keyfunc, methods: make(map[string]jwt.SigningMethod, len(cfg.Methods))}
	for _, m := range cfg.Methods {
		v.methods[m] = jwt.GetSigningMethod(m)
	}
	return v
}

var (
	errNoToken      = fmt.Errorf("%w: no bearer token", ErrNoKey)
	errTokenTooLong = fmt.Errorf("%w: JWT over the size bound", errTooLong)
	errNoClaim      = fmt.Errorf("%w: claim absent or empty", ErrNoKey)
	errNoClaims     = fmt.Errorf("%w: no claims in the request context", ErrNoKey)
	// errUnverified reports a *jwt.Token in the request context whose Valid
	// flag is false (parsed without verification, or rejected):
	// [ClaimFromContext] never reads its claims.
	errUnverified = errors.New("keyfuncs: token in context is not verified")
)

// cutBearer returns the token of an "Bearer <token>" credential.
func cutBearer(v string) (string, bool) {
	const scheme = "bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		return "", false
	}
	return trimOWS(v[len(scheme):]), true
}

// checkKeyType rejects a static key that cannot verify method m, saying
// what is wrong with it: an empty or nil key (typically read from an
// environment variable that is not set), a key of the wrong type, or an
// ECDSA key on the wrong curve.
func checkKeyType(m string, key any) error {
	switch {
	case strings.HasPrefix(m, "HS"):
		b, ok := key.([]byte)
		if !ok {
			return fmt.Errorf("keyfuncs: JWT method %s needs the HMAC secret as a []byte JWTConfig.Key, got %T", m, key)
		}
		if len(b) == 0 {
			return fmt.Errorf("keyfuncs: JWT method %s: the key is empty (JWTConfig.Key is a []byte of length 0; is the variable it is read from unset?): pass the HMAC secret", m)
		}
	case strings.HasPrefix(m, "RS"), strings.HasPrefix(m, "PS"):
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("keyfuncs: JWT method %s needs an *rsa.PublicKey JWTConfig.Key, got %T", m, key)
		}
		if k == nil {
			return fmt.Errorf("keyfuncs: JWT method %s: the key is a nil *rsa.PublicKey: pass the issuer's public key", m)
		}
	case strings.HasPrefix(m, "ES"):
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return fmt.Errorf("keyfuncs: JWT method %s needs an *ecdsa.PublicKey JWTConfig.Key, got %T", m, key)
		}
		curve := map[string]string{"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}[m]
		if k == nil || k.Curve == nil || k.Curve.Params().Name != curve {
			return fmt.Errorf("keyfuncs: JWT method %s needs an ECDSA key on curve %s", m, curve)
		}
	case m == "EdDSA":
		k, ok := key.(ed25519.PublicKey)
		if !ok {
			return fmt.Errorf("keyfuncs: JWT method %s needs an ed25519.PublicKey JWTConfig.Key, got %T", m, key)
		}
		if len(k) == 0 {
			return fmt.Errorf("keyfuncs: JWT method %s: the key is empty: pass the issuer's %d-byte public key", m, ed25519.PublicKeySize)
		}
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("keyfuncs: JWT method %s: the ed25519.PublicKey has %d bytes, want %d", m, len(k), ed25519.PublicKeySize)
		}
	default:
		return fmt.Errorf("keyfuncs: JWT signing method %q needs a Keyfunc", m)
	}
	return nil
}

// ClaimFromContext keys requests by a claim (default "sub" when claim is
// "") of the token an earlier authentication middleware verified and stored
// under ctxKey in the request context. The stored value may be
// jwt.MapClaims, map[string]any, a *jwt.Token (used only if its Valid flag is
// set, else an error), or any jwt.Claims (then only "sub", "iss" are
// readable). No value, or no such claim, yields [ErrNoKey]; an unsupported
// value or a claim that is neither a string nor a number is another error.
// The claim is passed through [Bound].
//
// Safe for: routes behind an authentication middleware that verifies the
// token (signature, expiry) before storing it, which is what makes the claim
// trustworthy. ClaimFromContext verifies nothing itself: storing an
// unverified token's claims under ctxKey would let a client choose its key.
// It costs no cryptography.
func ClaimFromContext(ctxKey any, claim string) Func {
	if claim == "" {
		claim = defaultClaim
	}
	return func(r Request) (string, error) {
		return claimsKey(r.Value(ctxKey), claim)
	}
}

func claimsKey(v any, claim string) (string, error) {
	switch c := v.(type) {
	case nil:
		return "", errNoClaims
	case jwt.MapClaims:
		return claimKey(c, claim)
	case map[string]any:
		return claimKey(c, claim)
	case *jwt.Token:
		if c == nil {
			return "", errNoClaims
		}
		if !c.Valid {
			return "", errUnverified
		}
		return claimsKey(c.Claims, claim)
	case jwt.Claims:
		var s string
		var err error
		switch claim {
		case "sub":
			s, err = safeCall(c.GetSubject)
		case "iss":
			s, err = safeCall(c.GetIssuer)
		default:
			return "", fmt.Errorf("keyfuncs: claim %q cannot be read from %T: store jwt.MapClaims in the context", claim, v)
		}
		if err != nil {
			return "", fmt.Errorf("keyfuncs: claim %q: %w", claim, err)
		}
		if s == "" {
			return "", errNoClaim
		}
		return Bound(s), nil
	default:
		return "", fmt.Errorf("keyfuncs: unsupported claims type %T in the request context", v)
	}
}

// claimKey renders claims[claim] as a bounded key: strings as they are,
// integers and other numbers in their shortest decimal form.
func claimKey(claims map[string]any, claim string) (string, error) {
	var s string
	switch v := claims[claim].(type) {
	case nil:
		return "", errNoClaim
	case string:
		s = v
	case json.Number:
		s = v.String()
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	default:
		return "", fmt.Errorf("keyfuncs: claim %q is a %T, not a string or number", claim, v)
	}
	if s == "" {
		return "", errNoClaim
	}
	return Bound(s), nil
}

// ContextValue keys requests by a value an earlier middleware stored under
// ctxKey in the request context: a string, a fmt.Stringer, or an integer
// (a user id), passed through [Bound]. No value, or an empty string, yields
// [ErrNoKey]; another type is an error.
//
// Safe for: values set by your own code after authentication (a user id, a
// tenant id). Never store client-supplied material there unverified.
func ContextValue(ctxKey any) Func {
	return func(r Request) (string, error) {
		var s string
		switch v := r.Value(ctxKey).(type) {
		case nil:
			return "", errNoContextValue
		case string:
			s = v
		case int:
			s = strconv.Itoa(v)
		case int64:
			s = strconv.FormatInt(v, 10)
		case uint64:
			s = strconv.FormatUint(v, 10)
		case fmt.Stringer:
			var err error
			if s, err = safeCall(func() (string, error) { return v.String(), nil }); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("keyfuncs: context value is a %T, not a string, integer or fmt.Stringer", v)
		}
		if s == "" {
			return "", errNoContextValue
		}
		return Bound(s), nil
	}
}

var errNoContextValue = fmt.Errorf("%w: no value in the request context", ErrNoKey)

// safeCall calls a method of a caller-supplied value (a Stringer, a
// jwt.Claims) and turns a panic, such as a nil pointer receiver, into an
// error: nothing on the request path panics.
func safeCall(f func() (string, error)) (s string, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = "", fmt.Errorf("keyfuncs: reading the context value panicked: %v", p)
		}
	}()
	return f()
}
