package keyfuncs

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHTTPRequestView(t *testing.T) {
	r := httptest.NewRequest("POST", "/users/42?x=1&x=2&q=a%20b&p=a+b", nil)
	r.RemoteAddr = "203.0.113.7:5555"
	r.Header.Add("X-Forwarded-For", "1.1.1.1")
	r.Header.Add("x-forwarded-for", "2.2.2.2")
	r.Pattern = "POST /users/{id}"
	req := withValue(FromHTTP(r).(httpRequest), ctxKey("k"), "v")

	assert.Equal(t, "POST", req.Method())
	assert.Equal(t, "POST /users/{id}", req.Route())
	assert.Equal(t, "/users/42", req.Path())
	assert.Equal(t, "1.1.1.1", req.Header("x-FORWARDED-for"))
	assert.Equal(t, []string{"1.1.1.1", "2.2.2.2"}, req.HeaderValues("X-Forwarded-For"))
	assert.Nil(t, req.HeaderValues("X-Absent"))
	assert.Equal(t, "1", req.Query("x"))
	assert.Equal(t, "a b", req.Query("q"))
	assert.Equal(t, "a b", req.Query("p"))
	assert.Equal(t, "", req.Query("absent"))
	assert.Equal(t, "203.0.113.7:5555", req.RemoteAddr())
	assert.Equal(t, "v", req.Value(ctxKey("k")))
	assert.Nil(t, req.Value(ctxKey("other")))
	assert.Same(t, req.HTTP(), req.HTTP())
}

func TestFromHTTPNil(t *testing.T) {
	var z httpRequest
	assert.Equal(t, "", z.Method())
	assert.Equal(t, "", z.Route())
	assert.Equal(t, "", z.Path())
	assert.Equal(t, "", z.Header("X"))
	assert.Nil(t, z.HeaderValues("X"))
	assert.Equal(t, "", z.Query("x"))
	assert.Equal(t, "", z.RemoteAddr())
	assert.Nil(t, z.Value("x"))
	assert.Nil(t, z.HTTP())
	_, err := PeerIP().Key(z)
	assert.ErrorIs(t, err, ErrNoKey)

	r := &http.Request{} // no URL, no method: what a hand-built request looks like
	assert.Equal(t, "GET", FromHTTP(r).Method())
	assert.Equal(t, "", FromHTTP(r).Path())
	assert.Equal(t, "", FromHTTP(r).Query("x"))
}

func TestQueryMatchesURLValues(t *testing.T) {
	for _, raw := range []string{
		"", "a=1", "a=1&a=2", "a", "a=", "=1", "&&a=1&&", "a%3D=1&a=2", "a=%zz&a=2", "%zz=1&a=3",
		"a;b=1&a=4", "a=1;b=2&a=5", "b=1&a=x%20y", "a=x+y", "a+b=1", "a%20b=2", "A=1", "a=%", "a=1=2",
	} {
		want := url.Values{}
		if v, err := url.ParseQuery(raw); err == nil || v != nil {
			want = v
		}
		for _, name := range []string{"a", "b", "a b", "A", ""} {
			assert.Equal(t, want.Get(name), queryValue(raw, name), "query %q name %q", raw, name)
		}
	}
}

func TestHTTPRequestDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	r := httptest.NewRequest("GET", "/p?a=1&b=2", nil)
	r.RemoteAddr = "203.0.113.7:1"
	r.Header.Set("X-Forwarded-For", "1.1.1.1")
	var n int
	var v any
	allocs := testing.AllocsPerRun(100, func() {
		var req Request = FromHTTP(r)
		n += len(req.Method()) + len(req.Route()) + len(req.Path())
		n += len(req.Header("X-Forwarded-For"))
		n += len(req.HeaderValues("X-Forwarded-For"))
		n += len(req.Query("b"))
		n += len(req.RemoteAddr())
		v = req.Value(ctxKey("x"))
	})
	assert.Zero(t, allocs)
	assert.Positive(t, n)
	assert.Nil(t, v)
}

func TestResolverAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	xff := must(XForwardedFor(trustedProxies...))
	fwd := must(Forwarded(trustedProxies...))
	tests := []struct {
		name string
		fn   func(Request) (string, error)
		req  Request
		max  float64
	}{
		{"peer v4", PeerIP().Key, newReq(t, "203.0.113.7:1"), 1},
		{"peer v6", PeerIP().Key, newReq(t, "[2001:db8::1]:1"), 1},
		{"xff 3 hops", xff.Key, newReq(t, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP+", 10.0.0.2"), 1},
		{"forwarded 3 hops", fwd.Key, newReq(t, lbPeer, "Forwarded", "for="+victimIP+", for="+clientIP+", for=10.0.0.2"), 1},
	}
	for _, tc := range tests {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := tc.fn(tc.req); err != nil {
				panic(err)
			}
		})
		assert.LessOrEqual(t, allocs, tc.max, tc.name)
	}
	req := newReq(t, lbPeer, "X-Forwarded-For", victimIP+", "+clientIP+", 10.0.0.2")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := xff.ClientIP(req); err != nil {
			panic(err)
		}
	}), "ClientIP")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := xff.Prefix(req); err != nil {
			panic(err)
		}
	}), "Prefix")
}
