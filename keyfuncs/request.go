package keyfuncs

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// Request is the framework-neutral view of an HTTP request that every adapter
// provides and every key function reads. Implementations must be safe to call
// from the goroutine serving the request and should not allocate: an adapter
// wraps its framework's request (or context) in a pointer-shaped value.
//
// Values returned by Request are owned by the framework: key functions never
// modify them and never retain them after they return.
type Request interface {
	// Method is the request method as sent ("GET"). It is client-chosen.
	Method() string
	// Route is the route pattern the framework matched ("/users/:id",
	// "GET /users/{id}"), or "" when unknown (for example when the limiter
	// runs before routing). Unlike Path it has bounded cardinality.
	Route() string
	// Path is the URL path as sent. It is client-chosen and unbounded in
	// cardinality: never key quotas by it alone.
	Path() string
	// Header is the first value of the named header (name in any case), or
	// "" when absent.
	Header(name string) string
	// HeaderValues is every value of a repeated header (for example
	// X-Forwarded-For sent on several lines), in the order received, or nil
	// when absent. The caller must not modify the returned slice.
	HeaderValues(name string) []string
	// Query is the first value of the named query parameter, or "".
	Query(name string) string
	// RemoteAddr is the TCP peer as the server saw it, "ip:port" or a bare
	// ip. It is the only address a client cannot forge.
	RemoteAddr() string
	// Value is a request-scoped value (context.Context's Value), nil if none.
	// It is where an earlier authentication middleware leaves the verified
	// principal.
	Value(key any) any
}

// Func extracts a rate-limit key from a request. It returns [ErrNoKey]
// (wrapped or not) when the request carries no key of its kind (missing
// header, no token); other errors mean the material was present but invalid
// (forged or expired token, over-long API key). Callers treat any error as
// "no identity"; errors.Is(err, ErrNoKey) tells the two apart, for example to
// fall through to the next key function (see [FirstOf]).
//
// Every Func in this package is safe for concurrent use, never panics on any
// request, and returns keys bounded in length. A global limit (one quota
// shared by every client, protecting a backend) is a Func that returns
// one constant key: func(Request) (string, error) { return "all", nil }.
type Func func(Request) (string, error)

// ErrNoKey reports that a request carries no key of the kind a [Func] looks
// for. It is returned wrapped; test it with errors.Is.
var ErrNoKey = errors.New("keyfuncs: no key")

// httpRequest is FromHTTP's view: a single pointer, so converting it to a
// Request does not allocate. The zero value (nil request) is valid: every
// method returns its zero value.
type httpRequest struct {
	r *http.Request
}

var _ HTTPRequester = httpRequest{}

// FromHTTP returns the [Request] view of r, for net/http middleware and for
// tests. Building it and converting it to a Request do not allocate, and
// none of its methods allocate except Query on a percent-encoded value. It
// implements [HTTPRequester] (HTTP returns r). A nil r is valid: every
// method returns its zero value.
//
// Method is GET when r.Method is "" (as net/http reads it). Route is
// r.Pattern, which net/http's ServeMux sets only once it has routed the
// request: a limiter wrapping the whole mux sees "". Query scans the raw
// query without building a url.Values map, with the semantics of
// url.Values.Get (pairs with a semicolon or an invalid escape are skipped,
// as url.ParseQuery does). Value reads r's context.
func FromHTTP(r *http.Request) Request { return httpRequest{r: r} }

// HTTP returns the wrapped *http.Request (nil for the zero value).
func (h httpRequest) HTTP() *http.Request { return h.r }

// Method implements [Request].
func (h httpRequest) Method() string {
	if h.r == nil {
		return ""
	}
	if h.r.Method == "" {
		return http.MethodGet // net/http: "" means GET
	}
	return h.r.Method
}

// Route implements [Request]: the ServeMux pattern (Go 1.22+), "" if none.
func (h httpRequest) Route() string {
	if h.r == nil {
		return ""
	}
	return h.r.Pattern
}

// Path implements [Request].
func (h httpRequest) Path() string {
	if h.r == nil || h.r.URL == nil {
		return ""
	}
	return h.r.URL.Path
}

// Header implements [Request].
func (h httpRequest) Header(name string) string {
	if h.r == nil {
		return ""
	}
	return h.r.Header.Get(name)
}

// HeaderValues implements [Request].
func (h httpRequest) HeaderValues(name string) []string {
	if h.r == nil {
		return nil
	}
	return h.r.Header.Values(name)
}

func (h httpRequest) Query(name string) string {
	if h.r == nil || h.r.URL == nil {
		return ""
	}
	return queryValue(h.r.URL.RawQuery, name)
}

// RemoteAddr implements [Request].
func (h httpRequest) RemoteAddr() string {
	if h.r == nil {
		return ""
	}
	return h.r.RemoteAddr
}

// Value implements [Request].
func (h httpRequest) Value(key any) any {
	if h.r == nil {
		return nil
	}
	return h.r.Context().Value(key)
}

// queryValue returns the first value of name in the raw query, as
// url.ParseQuery(raw).Get(name) would, without allocating unless the value
// must be unescaped.
func queryValue(raw, name string) string {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.IndexByte(pair, ';') >= 0 {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if needsUnescape(k) {
			uk, err := url.QueryUnescape(k)
			if err != nil || uk != name {
				continue
			}
		} else if k != name {
			continue
		}
		if !needsUnescape(v) {
			return v
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			continue
		}
		return uv
	}
	return ""
}

func needsUnescape(s string) bool {
	return strings.IndexByte(s, '%') >= 0 || strings.IndexByte(s, '+') >= 0
}
