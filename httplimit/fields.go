package httplimit

import "github.com/limitkit/limitkit/httplimit/internal/respond"

// Fields is the list of response header fields for one request, for
// adapters whose framework has no http.Header: [Engine.Fields] fills
// one, and the adapter writes each field (Len and At). Numeric values are
// formatted into a buffer inside the Fields, so that filling one
// allocates nothing. The zero value is empty and ready; a Fields is meant
// to live on the stack for one request (nothing in it points into
// itself, so it stays there), and its contents are valid until it is
// reused. It is not safe for concurrent use.
type Fields struct {
	f respond.Fields
}

// Len is the number of fields, at most 8.
func (f *Fields) Len() int { return f.f.Len() }

// At returns field i (0 <= i < Len): its name in the canonical form
// net/http and fasthttp store it ("X-Ratelimit-Limit",
// "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After",
// "Ratelimit-Policy", "Ratelimit", or the [WithDegradedHeader] name;
// header lookups are case-insensitive, so clients reading
// X-RateLimit-Limit find them) and its value, either formatted (dyn, aliasing f: copy it before f changes, never
// modify it) or constant (static). Exactly one of dyn and static is
// non-empty.
func (f *Fields) At(i int) (name string, dyn []byte, static string) { return f.f.At(i) }

// IntText is the decimal form of v for a header value: written into buf
// (at least 20 bytes; not necessarily at its start) and returned, or,
// for 0 <= v < 1024, a view of a ready-made constant, so that it formats
// nothing. The result is read-only (it may alias a string): pass it to an
// API that copies it, as fasthttp's header setters do. For adapters
// writing a [Triple]'s Remaining and ResetN.
func IntText(buf []byte, v int64) []byte { return respond.IntText(buf, v) }
