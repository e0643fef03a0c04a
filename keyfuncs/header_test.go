package keyfuncs

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBound(t *testing.T) {
	short := strings.Repeat("a", maxRawKeyLen)
	assert.Equal(t, short, Bound(short))
	assert.Equal(t, "tenant-42 (eu)", Bound("tenant-42 (eu)"))
	assert.Equal(t, "", Bound(""))
	for _, s := range []string{short + "a", "~abc", "caf\xc3\xa9", "a\x00b", "line\nbreak", "\x7f"} {
		b := Bound(s)
		assert.Len(t, b, 33, "%q", s)
		assert.True(t, strings.HasPrefix(b, "~"), "%q", s)
		assert.Equal(t, b, Bound(s), "deterministic")
	}
	// Long values sharing a prefix are hashed whole, never truncated.
	long := strings.Repeat("x", 1000)
	assert.NotEqual(t, Bound(long+"1"), Bound(long+"2"))
	// A verbatim value can never equal a hashed one: hashed values start
	// with '~' and verbatim ones cannot.
	h := Bound(long)
	assert.Equal(t, h, Bound(long))
	assert.NotEqual(t, h, Bound(h), "a client sending the hash gets a different key")
}

func TestHeader(t *testing.T) {
	fn, err := Header("x-tenant-id")
	require.NoError(t, err)
	k, err := fn(newReq(t, lbPeer, "X-Tenant-Id", "  acme  ", "X-Tenant-Id", "other"))
	require.NoError(t, err)
	assert.Equal(t, "acme", k)

	_, err = fn(newReq(t, lbPeer))
	assert.ErrorIs(t, err, ErrNoKey)
	_, err = fn(newReq(t, lbPeer, "X-Tenant-Id", " "))
	assert.ErrorIs(t, err, ErrNoKey)

	k, err = fn(newReq(t, lbPeer, "X-Tenant-Id", strings.Repeat("t", 100)))
	require.NoError(t, err)
	assert.Equal(t, Bound(strings.Repeat("t", 100)), k)

	_, err = fn(newReq(t, lbPeer, "X-Tenant-Id", strings.Repeat("t", maxHeaderKeyLen+1)))
	assert.ErrorIs(t, err, errTooLong)
	assert.False(t, errors.Is(err, ErrNoKey))

	for _, bad := range []string{"", "X Tenant", "X-Tenant:", "é"} {
		_, err := Header(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestAPIKeyIsNeverStoredRaw(t *testing.T) {
	fn, err := APIKey("X-API-Key", "api_key")
	require.NoError(t, err)
	const secret = "sk_live_0123456789abcdef"
	k, err := fn(newReq(t, lbPeer, "X-API-Key", secret))
	require.NoError(t, err)
	assert.Len(t, k, 32)
	assert.NotContains(t, k, secret)
	assert.NotContains(t, k, "sk_live")

	// The query parameter is the fallback and gives the same key.
	r := newReq(t, lbPeer)
	r.HTTP().URL.RawQuery = "api_key=" + secret
	kq, err := fn(r)
	require.NoError(t, err)
	assert.Equal(t, k, kq)

	// Different keys differ.
	k2, err := fn(newReq(t, lbPeer, "X-API-Key", secret+"x"))
	require.NoError(t, err)
	assert.NotEqual(t, k, k2)
}

func TestAPIKeyBounds(t *testing.T) {
	fn, err := APIKey("X-API-Key", "")
	require.NoError(t, err)
	_, err = fn(newReq(t, lbPeer))
	assert.ErrorIs(t, err, ErrNoKey)
	_, err = fn(newReq(t, lbPeer, "X-API-Key", strings.Repeat("k", maxAPIKeyLen)))
	assert.NoError(t, err)
	_, err = fn(newReq(t, lbPeer, "X-API-Key", strings.Repeat("k", maxAPIKeyLen+1)))
	assert.ErrorIs(t, err, errTooLong)
	assert.False(t, errors.Is(err, ErrNoKey))

	qonly, err := APIKey("", "key")
	require.NoError(t, err)
	r := newReq(t, lbPeer, "X-API-Key", "ignored")
	_, err = qonly(r)
	assert.ErrorIs(t, err, ErrNoKey, "the header is not consulted when disabled")
}

func TestAPIKeyHMAC(t *testing.T) {
	plain := must(APIKey("X-API-Key", ""))
	s1 := must(APIKeyHMAC("X-API-Key", "", []byte("0123456789abcdef")))
	s2 := must(APIKeyHMAC("X-API-Key", "", []byte("fedcba9876543210")))
	req := newReq(t, lbPeer, "X-API-Key", "weak")
	kp, _ := plain(req)
	k1, _ := s1(req)
	k2, _ := s2(req)
	assert.Len(t, k1, 32)
	assert.NotEqual(t, kp, k1)
	assert.NotEqual(t, k1, k2)
}

func TestAPIKeyKnownAnswer(t *testing.T) {
	// SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	plain := must(APIKey("X-API-Key", ""))
	k, err := plain(newReq(t, lbPeer, "X-API-Key", "abc"))
	require.NoError(t, err)
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223", k)
	// HMAC-SHA256(key="key", "The quick brown fox jumps over the lazy dog")
	// = f7bc83f4...2d1a3cd8, the well-known vector; APIKey requires a
	// 16-byte secret, so check the hash function directly.
	assert.Equal(t, "f7bc83f430538424b13298e6aa6fb143", hashKey([]byte("key"), "The quick brown fox jumps over the lazy dog"))
}

func TestAPIKeyConstructionErrors(t *testing.T) {
	_, err := APIKey("", "")
	assert.ErrorContains(t, err, "needs a header name, a query parameter name, or both")
	_, err = APIKey("X API", "")
	assert.ErrorContains(t, err, "valid header name")
	_, err = APIKeyHMAC("X-API-Key", "", []byte("short"))
	assert.ErrorContains(t, err, "at least 16 random bytes")
	_, err = APIKeyHMAC("X-API-Key", "", nil)
	assert.ErrorContains(t, err, "has 0 bytes", "an empty secret is a mistake, not plain SHA-256")
}
