package keyfuncs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Bounds on what a token may make [JWTClaim] parse. A token is attacker
// input until its signature has been checked; these keep the work done
// on it linear in its size and small.
const (
	// maxJWTHeaderBytes bounds the encoded header, which is decoded
	// before the signature is checked (the key lookup needs its alg and
	// kid). 1 KiB holds alg, typ, kid, x5t and jku many times over; a
	// header carrying a certificate chain (x5c) or a key (jwk) is refused.
	maxJWTHeaderBytes = 1 << 10
	// maxJWTDepth bounds the nesting of objects and arrays in the header
	// and in the claims. Issuers nest a few levels (realm_access.roles);
	// deeper is refused without being decoded.
	maxJWTDepth = 16
)

// jwtVerifier checks a compact JWS in the order that keeps a hostile
// token cheap: the size and shape first, then the small header (for the
// algorithm and key id), then the signature over header.payload, and only
// then the claims, bounded in nesting, decoded and validated (exp, nbf,
// iss, aud). jwt.Parser decodes the claims before it verifies the
// signature, so a forged 8 KiB token of deeply nested claims cost ten
// times a request; here a forged token costs one signature check.
type jwtVerifier struct {
	methods   map[string]jwt.SigningMethod // the pinned algorithms
	key       any                          // the static key, or nil
	keyfunc   jwt.Keyfunc                  // when key is nil
	validator *jwt.Validator
}

var (
	errJWTShape     = fmt.Errorf("%w: a token has three dot-separated segments", jwt.ErrTokenMalformed)
	errJWTHeaderLen = fmt.Errorf("%w: header over %d bytes", jwt.ErrTokenMalformed, maxJWTHeaderBytes)
	errJWTDepth     = fmt.Errorf("%w: JSON nested deeper than %d levels", jwt.ErrTokenMalformed, maxJWTDepth)
	errJWTNoAlg     = fmt.Errorf("%w: header without a string alg", jwt.ErrTokenUnverifiable)
)

// verify returns the claims of tok once its signature and claims are
// valid.
func (v *jwtVerifier) verify(tok string) (jwt.MapClaims, error) {
	h, payload, sig, err := splitJWS(tok)
	if err != nil {
		return nil, err
	}
	alg, header, err := v.readHeader(h)
	if err != nil {
		return nil, err
	}
	method := v.methods[alg]
	if method == nil {
		return nil, fmt.Errorf("%w: signing method %q is not one of JWTConfig.Methods", jwt.ErrTokenSignatureInvalid, alg)
	}
	sb, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %w", jwt.ErrTokenMalformed, err)
	}
	if err := v.checkSignature(tok, tok[:len(h)+1+len(payload)], sb, method, header); err != nil {
		return nil, err
	}
	return v.claims(payload)
}

// splitJWS cuts a compact JWS into its three segments, refusing a header
// over maxJWTHeaderBytes.
func splitJWS(tok string) (header, payload, sig string, err error) {
	header, rest, ok := strings.Cut(tok, ".")
	if !ok {
		return "", "", "", errJWTShape
	}
	payload, sig, ok = strings.Cut(rest, ".")
	if !ok || strings.IndexByte(sig, '.') >= 0 {
		return "", "", "", errJWTShape
	}
	if len(header) > maxJWTHeaderBytes {
		return "", "", "", errJWTHeaderLen
	}
	return header, payload, sig, nil
}

// readHeader decodes the header segment h and returns its alg. With a
// static key only alg is read: decoding into a struct skips the other
// members without building them. A Keyfunc gets the whole header (kid,
// x5t, ...), as a map, returned too.
func (v *jwtVerifier) readHeader(h string) (alg string, header map[string]any, err error) {
	hb, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return "", nil, fmt.Errorf("%w: header: %w", jwt.ErrTokenMalformed, err)
	}
	if v.key != nil {
		var h struct {
			Alg *string `json:"alg"`
		}
		if err := decodeBounded(hb, &h); err != nil {
			return "", nil, fmt.Errorf("header: %w", err)
		}
		if h.Alg == nil {
			return "", nil, errJWTNoAlg
		}
		return *h.Alg, nil, nil
	}
	if err := decodeBounded(hb, &header); err != nil {
		return "", nil, fmt.Errorf("header: %w", err)
	}
	alg, ok := header["alg"].(string)
	if !ok {
		return "", nil, errJWTNoAlg
	}
	return alg, header, nil
}

// checkSignature verifies the signature sb of signed (tok's
// header.payload) with the static key or the Keyfunc's, which sees the
// header before the claims are decoded.
func (v *jwtVerifier) checkSignature(tok, signed string, sb []byte, method jwt.SigningMethod, header map[string]any) error {
	key := v.key
	if key == nil {
		var err error
		if key, err = v.keyfunc(&jwt.Token{Raw: tok, Method: method, Header: header, Claims: jwt.MapClaims{}, Signature: sb}); err != nil {
			return fmt.Errorf("%w: keyfunc: %w", jwt.ErrTokenUnverifiable, err)
		}
	}
	var err error
	if set, ok := key.(jwt.VerificationKeySet); ok {
		err = errors.New("keyfunc returned an empty key set")
		for _, k := range set.Keys {
			if err = method.Verify(signed, sb, k); err == nil {
				break
			}
		}
	} else {
		err = method.Verify(signed, sb, key)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", jwt.ErrTokenSignatureInvalid, err)
	}
	return nil
}

// claims decodes the verified payload segment and validates its claims.
func (v *jwtVerifier) claims(payload string) (jwt.MapClaims, error) {
	pb, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: claims: %w", jwt.ErrTokenMalformed, err)
	}
	claims := jwt.MapClaims{}
	if err := decodeBounded(pb, &claims); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	if err := v.validator.Validate(claims); err != nil {
		return nil, fmt.Errorf("%w: %w", jwt.ErrTokenInvalidClaims, err)
	}
	return claims, nil
}

// decodeBounded decodes the JSON object b into dst (numbers as
// json.Number) after checking, in one pass without allocating, that it
// nests at most maxJWTDepth levels.
func decodeBounded(b []byte, dst any) error {
	if jsonDepth(b) > maxJWTDepth {
		return errJWTDepth
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(dst); err != nil {
		return fmt.Errorf("%w: %w", jwt.ErrTokenMalformed, err)
	}
	return nil
}

// jsonDepth returns the deepest nesting of objects and arrays in b,
// skipping strings. It does not validate b (the decoder does).
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}
