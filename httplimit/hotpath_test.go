package httplimit

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/httplimit/internal/respond"
	"github.com/limitkit/limitkit/keyfuncs"
)

// slowPeerKey is the default key by the general path: keyfuncs.PeerIP's
// prefix, printed as appendKey prints it.
func slowPeerKey(remote string) (string, error) {
	r, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	r.RemoteAddr = remote
	b, err := appendKey(nil, keySpec{ip: keyfuncs.PeerIP(), set: true}, httpView{r})
	return string(b), err
}

func fastPeerKey(remote string) (string, bool) {
	r, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	r.RemoteAddr = remote
	b, ok := appendPeerIPv4(nil, httpView{r})
	return string(b), ok
}

// checkPeerFastPath fails when the fast path answers differently from the
// general one: it may decline (the general path then decides), never
// disagree.
func checkPeerFastPath(t *testing.T, remote string) bool {
	t.Helper()
	fast, ok := fastPeerKey(remote)
	if !ok {
		return false
	}
	slow, err := slowPeerKey(remote)
	require.NoError(t, err, "fast path took %q, which the general path rejects", remote)
	require.Equal(t, slow, fast, "fast path key of %q", remote)
	return true
}

func TestPeerIPv4FastPathAgrees(t *testing.T) {
	taken := []string{
		"203.0.113.7:40001", "203.0.113.7", "0.0.0.0:0", "255.255.255.255:65535",
		"10.0.0.1:1", "1.2.3.4:00080", "100.64.0.10:8080",
	}
	declined := []string{
		"", "203.0.113.7:", "203.0.113.7:65536", "203.0.113.7:123456", "203.0.113.7:8o",
		"01.2.3.4:1", "1.2.3.04", "256.1.1.1:1", "1.2.3:1", "1.2.3.4.5:1", "1..3.4", ".1.2.3",
		"1.2.3.", "1.2.3.4 :1", "[::1]:80", "::1", "2001:db8::1", "[::ffff:1.2.3.4]:80",
		"1.2.3.4%eth0", "unix:/tmp/sock", "@", "1.2.3.1000", "1.2.3.4:1:2",
	}
	for _, s := range taken {
		assert.True(t, checkPeerFastPath(t, s), "%q should take the fast path", s)
	}
	for _, s := range declined {
		assert.False(t, checkPeerFastPath(t, s), "%q should decline the fast path", s)
	}
}

func FuzzPeerIPv4FastPath(f *testing.F) {
	for _, s := range []string{"203.0.113.7:40001", "1.2.3.4", "01.2.3.4:1", "[::1]:80", "1.2.3.4:65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkPeerFastPath(t, s) })
}

// peerView is a request view that also holds the peer as an address, as
// fiberlimit's does.
type peerView struct {
	httpView
	addr netip.Addr
}

func (p peerView) PeerAddr() netip.Addr { return p.addr }

func TestPeerAddrerFastPath(t *testing.T) {
	for _, tc := range []struct {
		remote string
		addr   netip.Addr
		ok     bool
	}{
		{"203.0.113.7:1", netip.MustParseAddr("203.0.113.7"), true},
		{"[2001:db8::1]:1", netip.MustParseAddr("2001:db8::1"), false},
		{"", netip.Addr{}, false},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
		r.RemoteAddr = tc.remote
		b, ok := appendPeerIPv4(nil, peerView{httpView{r}, tc.addr})
		require.Equal(t, tc.ok, ok, tc.remote)
		if ok {
			slow, err := slowPeerKey(tc.remote)
			require.NoError(t, err)
			assert.Equal(t, slow, string(b))
		}
	}
}

// The default key and the X-RateLimit-Limit value come from the fast
// paths; a custom peer resolver (another *Resolver) takes the general one,
// with the same key.
func TestHotPathKeysAndLimit(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithIPKey(keyfuncs.PeerIP())}} {
		st := &keyStore{}
		e, err := newEngineNamed("x", limiter(t, st, "p"), opts...)
		require.NoError(t, err)
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/x", nil)
		r.RemoteAddr = "203.0.113.7:40001"
		r.Pattern = "GET /x"
		var res Result
		e.Decide(t.Context(), httpView{r}, nil, &res)
		require.Equal(t, Pass, res.Action)
		assert.Equal(t, "GET /x|203.0.113.7", st.last())
		var f Fields
		e.Fields(&res, &f)
		v, ok := f.f.Get(respond.HeaderLimit)
		require.True(t, ok)
		assert.Equal(t, "10", v)
		assert.Equal(t, decide(e, t.Context(), httpView{r}).Action, Pass, "Decide and decide agree")
	}
}

// TestPeerIPv4FastPathAgreesOnPorts: appendPeerIPv4 (validPort) and
// keyfuncs.PeerIP (keyfuncs/internal/hostport) accept and refuse the same
// ports, so the fast path never keys an address the general path refuses.
func TestPeerIPv4FastPathAgreesOnPorts(t *testing.T) {
	for _, port := range []string{"0", "80", "65535", "00080", "", "65536", "99999", "123456", "-1", "8a", " 80", "+1", "8:", "80:80"} {
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
		r.RemoteAddr = "203.0.113.7:" + port
		_, fast := appendPeerIPv4(nil, httpView{r})
		_, err := keyfuncs.PeerIP().Prefix(keyfuncs.FromHTTP(r))
		if fast != (err == nil) {
			t.Errorf("port %q: fast path ok=%v, keyfuncs.PeerIP err=%v", port, fast, err)
		}
		if fast != validPort(port) {
			t.Errorf("port %q: fast path ok=%v, validPort=%v", port, fast, validPort(port))
		}
	}
}
