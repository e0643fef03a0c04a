package keyfuncs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
)

// Length bounds for key material.
const (
	// maxRawKeyLen is the longest value a key function returns verbatim.
	// Longer values, and values with bytes outside printable ASCII or
	// starting with '~', are replaced by "~" and 32 hex digits of their
	// SHA-256: bounded, collision-resistant (never truncated, so two long
	// values sharing a prefix never share a key), and disjoint from every
	// verbatim value.
	maxRawKeyLen = 64
	// maxHeaderKeyLen is the longest header value [Header] accepts; longer
	// values are an error rather than a key, so that hashing stays cheap.
	maxHeaderKeyLen = 4096
	// maxAPIKeyLen is the longest API key [APIKey] accepts.
	maxAPIKeyLen = 256
)

// errTooLong reports key material over its length bound. It is not
// [ErrNoKey]: the material is present but refused.
var errTooLong = errors.New("keyfuncs: key material too long")

// Bound returns s unchanged when it is at most 64 bytes of
// printable ASCII not starting with '~', and otherwise "~" followed by 32
// hex digits of its SHA-256. Key functions in this package apply it to every
// client-supplied value they return; apply it to your own untrusted values
// before they reach a store key.
func Bound(s string) string {
	if len(s) <= maxRawKeyLen && (s == "" || s[0] != '~') {
		printable := true
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				printable = false
				break
			}
		}
		if printable {
			return s
		}
	}
	sum := sha256.Sum256([]byte(s))
	var buf [33]byte
	buf[0] = '~'
	hex.Encode(buf[1:], sum[:16])
	return string(buf[:])
}

// Header keys requests by the value of the named header (first value,
// surrounding whitespace trimmed), passed through [Bound]. A missing or empty
// header yields [ErrNoKey]; a value over 4096 bytes is an error (not ErrNoKey).
//
// Safe for: headers a trusted layer in front of the server sets and clients
// cannot (a tenant id injected by an authenticating gateway). A header the
// client sends is a key the client chooses: rotating it evades the limit and
// copying a victim's value spends the victim's quota, so never key an
// unauthenticated endpoint by one alone. Construction fails on an invalid
// header name.
func Header(name string) (Func, error) {
	if !isToken(name) {
		return nil, fmt.Errorf("keyfuncs: Header needs a valid header name, got %q", name)
	}
	name = http.CanonicalHeaderKey(name)
	return func(r Request) (string, error) {
		v := trimOWS(r.Header(name))
		if v == "" {
			return "", errNoHeader
		}
		if len(v) > maxHeaderKeyLen {
			return "", errHeaderTooLong
		}
		return Bound(v), nil
	}, nil
}

var (
	errNoHeader      = fmt.Errorf("%w: header absent or empty", ErrNoKey)
	errHeaderTooLong = fmt.Errorf("%w: header value over %d bytes", errTooLong, maxHeaderKeyLen)
	errNoAPIKey      = fmt.Errorf("%w: no API key", ErrNoKey)
	errAPIKeyTooLong = fmt.Errorf("%w: API key over %d bytes", errTooLong, maxAPIKeyLen)
)

// APIKey keys requests by an API key taken from the named header, else from
// the named query parameter ("" disables either source; at least one is
// required). The key is never returned raw: the result is 32 hex digits of
// its SHA-256 (or of its HMAC, with [APIKeyHMAC]), so a secret never
// reaches a store key or a log. A missing or empty key yields [ErrNoKey]; a
// key over 256 bytes is an error (not ErrNoKey).
//
// APIKey does not check that the key is valid. Safe for: endpoints behind an
// authentication layer that has already rejected unknown keys. Before
// authentication a client can mint keys at will and get a fresh quota for
// each, so combine it with an IP limit there. Query parameters end up in
// access logs; prefer a header.
func APIKey(header, query string) (Func, error) {
	return apiKey(header, query, nil, false)
}

// APIKeyHMAC is [APIKey] returning HMAC-SHA256(secret, key) instead of
// SHA-256(key), so that someone who reads the store (a Redis dump, a log
// of keys) cannot test guesses of low-entropy API keys offline. The
// secret must be at least 16 bytes; APIKeyHMAC fails otherwise, also for
// an empty one (an unset environment variable must not silently mean "no
// secret"). The slice is copied.
func APIKeyHMAC(header, query string, secret []byte) (Func, error) {
	return apiKey(header, query, append([]byte(nil), secret...), true)
}

// apiKey is APIKey, keyed by secret (HMAC) when keyed.
func apiKey(header, query string, secret []byte, keyed bool) (Func, error) {
	if header == "" && query == "" {
		return nil, errors.New("keyfuncs: APIKey needs a header name, a query parameter name, or both")
	}
	if header != "" {
		if !isToken(header) {
			return nil, fmt.Errorf("keyfuncs: APIKey needs a valid header name, got %q", header)
		}
		header = http.CanonicalHeaderKey(header)
	}
	if keyed && len(secret) < 16 {
		return nil, fmt.Errorf("keyfuncs: the API key HMAC secret has %d bytes: use at least 16 random bytes", len(secret))
	}
	return func(r Request) (string, error) {
		var k string
		if header != "" {
			k = trimOWS(r.Header(header))
		}
		if k == "" && query != "" {
			k = r.Query(query)
		}
		if k == "" {
			return "", errNoAPIKey
		}
		if len(k) > maxAPIKeyLen {
			return "", errAPIKeyTooLong
		}
		return hashKey(secret, k), nil
	}, nil
}

// hashKey returns 32 hex digits of SHA-256(k), or of HMAC-SHA256(secret, k).
func hashKey(secret []byte, k string) string {
	var sum [sha256.Size]byte
	if secret == nil {
		sum = sha256.Sum256([]byte(k))
	} else {
		var h hash.Hash = hmac.New(sha256.New, secret)
		h.Write([]byte(k))
		h.Sum(sum[:0])
	}
	var buf [32]byte
	hex.Encode(buf[:], sum[:16])
	return string(buf[:])
}
