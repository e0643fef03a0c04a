package keyfuncs

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// splitJoin decodes Join's output; it fails unless s is a valid encoding.
// Join is injective iff every output decodes to its input.
func splitJoin(s string) ([]string, bool) {
	var parts []string
	for s != "" {
		i := strings.IndexByte(s, ':')
		if i <= 0 {
			return nil, false
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || i+1+n >= len(s) || s[i+1+n] != ',' {
			return nil, false
		}
		parts = append(parts, s[i+1:i+1+n])
		s = s[i+2+n:]
	}
	return parts, true
}

func TestJoinNeverCollides(t *testing.T) {
	assert.Equal(t, "3:a:b,1:c,", Join("a:b", "c"))
	assert.Equal(t, "1:a,3:b:c,", Join("a", "b:c"))
	assert.NotEqual(t, Join("a:b", "c"), Join("a", "b:c"))
	assert.NotEqual(t, Join("a,", "b"), Join("a", ",b"))
	assert.NotEqual(t, Join("", "a"), Join("a", ""))
	assert.NotEqual(t, Join("a"), Join("a", ""))
	assert.Equal(t, "", Join())
	assert.Equal(t, "0:,", Join(""))
	long := strings.Repeat("z", 12345)
	for _, parts := range [][]string{{"a:b", "c"}, {"", ""}, {"1:a,", "2"}, {long, "x"}, {"GET", "/users/{id}", "4:user,5:alice,"}} {
		got, ok := splitJoin(Join(parts...))
		require.True(t, ok, "%q", parts)
		assert.Equal(t, parts, got)
	}
}

func TestTaggedUserNamedLikeAnIPDoesNotCollideWithThatIP(t *testing.T) {
	user := ContextValue(ctxKey("user"))
	key := FirstOf(Tagged("user", user), Tagged("ip", PeerIP().Key))

	// An attacker registers the username "203.0.113.7" to spend the quota of
	// the anonymous client at 203.0.113.7 (or the other way round).
	asUser := withValue(newReq(t, "198.51.100.1:1"), ctxKey("user"), "203.0.113.7")
	anon := newReq(t, "203.0.113.7:1")
	ku, err := key(asUser)
	require.NoError(t, err)
	ka, err := key(anon)
	require.NoError(t, err)
	assert.Equal(t, "4:user,11:203.0.113.7,", ku)
	assert.Equal(t, "2:ip,11:203.0.113.7,", ka)
	assert.NotEqual(t, ku, ka)
}

func TestFirstOf(t *testing.T) {
	noKey := func(Request) (string, error) { return "", ErrNoKey }
	invalid := errors.New("forged")
	bad := func(Request) (string, error) { return "", invalid }
	ok := func(k string) Func { return func(Request) (string, error) { return k, nil } }
	req := newReq(t, lbPeer)

	tests := []struct {
		name    string
		fns     []Func
		want    string
		wantErr error
		noKey   bool
	}{
		{"first wins", []Func{ok("a"), ok("b")}, "a", nil, false},
		{"skips no key", []Func{noKey, ok("b")}, "b", nil, false},
		{"skips invalid material", []Func{bad, ok("b")}, "b", nil, false},
		{"all missing", []Func{noKey, noKey}, "", nil, true},
		{"invalid reported over missing", []Func{noKey, bad, noKey}, "", invalid, false},
		{"empty", nil, "", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FirstOf(tc.fns...)(req)
			assert.Equal(t, tc.want, got)
			switch {
			case tc.wantErr != nil:
				assert.ErrorIs(t, err, tc.wantErr)
				assert.False(t, errors.Is(err, ErrNoKey))
			case tc.noKey:
				assert.ErrorIs(t, err, ErrNoKey)
			default:
				assert.NoError(t, err)
			}
		})
	}
}

func TestFirstOfCopiesItsArguments(t *testing.T) {
	fns := []Func{constant("a")}
	f := FirstOf(fns...)
	fns[0] = constant("b")
	k, err := f(newReq(t, lbPeer))
	require.NoError(t, err)
	assert.Equal(t, "a", k)
}

func TestForgedTokenFallsBackToIPNotToTheClaimedUser(t *testing.T) {
	jwtFn := must(JWTClaim(JWTConfig{Methods: []string{"HS256"}, Key: hmacKey, Now: fixedNow}))
	key := FirstOf(Tagged("user", jwtFn), Tagged("ip", PeerIP().Key))
	forged := sign(t, jwtSigningHS256WrongKey(), claimsFor("victim"))
	k, err := key(newReq(t, "203.0.113.7:1", "Authorization", "Bearer "+forged))
	require.NoError(t, err)
	assert.Equal(t, "2:ip,11:203.0.113.7,", k)

	good := sign(t, jwtSigningHS256(), claimsFor("alice"))
	k, err = key(newReq(t, "203.0.113.7:1", "Authorization", "Bearer "+good))
	require.NoError(t, err)
	assert.Equal(t, "4:user,5:alice,", k)
}

func TestTaggedPropagatesErrors(t *testing.T) {
	noKey := func(Request) (string, error) { return "", ErrNoKey }
	_, err := Tagged("t", noKey)(newReq(t, lbPeer))
	assert.ErrorIs(t, err, ErrNoKey)
}

func TestNilFuncsFailInsteadOfPanicking(t *testing.T) {
	req := newReq(t, lbPeer)
	for name, f := range map[string]Func{
		"Tagged":            Tagged("t", nil),
		"FirstOf":           FirstOf(nil),
		"FirstOf of Tagged": FirstOf(Tagged("user", nil), Tagged("ip", nil)),
	} {
		_, err := f(req)
		assert.ErrorIs(t, err, errNilFunc, name)
		assert.False(t, errors.Is(err, ErrNoKey), name)
	}
	k, err := FirstOf(nil, constant("k"))(req)
	require.NoError(t, err)
	assert.Equal(t, "k", k)
}

func TestNilResolverKeysThePeer(t *testing.T) {
	var r *Resolver
	k, err := r.Key(newReq(t, "203.0.113.7:1", "X-Forwarded-For", victimIP))
	require.NoError(t, err)
	assert.Equal(t, clientIP, k)
	assert.Equal(t, sourcePeer, r.effectiveSource())
	assert.Equal(t, "keyfuncs.Resolver{source=peer ipv4=/32 ipv6=/64}", r.String())
	r48, err := r.WithPrefixes(0, 48)
	require.NoError(t, err)
	k, err = r48.Key(newReq(t, "[2001:db8:1:2::1]:1"))
	require.NoError(t, err)
	assert.Equal(t, "2001:db8:1::/48", k)
}

// constant keys every request by key.
func constant(key string) Func { return func(Request) (string, error) { return key, nil } }
