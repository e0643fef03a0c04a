package keyfuncs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// newReq builds a request from peer remote with the given header lines
// (name, value pairs; a repeated name makes a repeated header).
func newReq(tb testing.TB, remote string, hdr ...string) httpRequest {
	tb.Helper()
	if len(hdr)%2 != 0 {
		tb.Fatalf("newReq: odd header list %q", hdr)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return httpRequest{r}
}

// withValue returns req with key=val in its context.
func withValue(req httpRequest, key, val any) httpRequest {
	r := req.HTTP()
	return httpRequest{r.WithContext(context.WithValue(r.Context(), key, val))}
}

type ctxKey string

// must returns v, panicking (failing the test) on a construction error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
