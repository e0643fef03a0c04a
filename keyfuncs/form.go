package keyfuncs

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// MaxFormBody bounds the request body [FormField] reads: a body longer
// than this yields no key (and is left whole for the handler).
const MaxFormBody = 64 << 10

// HTTPRequester is implemented by request views backed by a *http.Request:
// [HTTPRequest] and the views of ginlimit and echolimit. [FormField] reads
// the body through it.
type HTTPRequester interface {
	HTTP() *http.Request
}

// BodyRequester is implemented by request views of frameworks that hold
// the whole body in memory (fiberlimit's: fasthttp reads it before any
// handler runs). Body must not be modified.
type BodyRequester interface {
	Body() []byte
}

// FormField keys the request by a field of its
// application/x-www-form-urlencoded body (a login form's "username"), so
// that failed logins are counted per account. The body is read up to
// [MaxFormBody] and put back, byte for byte, for the handler (net/http,
// gin, echo: r.Body is replaced by a reader of the same bytes; fiber keeps
// its body in memory and nothing is consumed). It returns [ErrNoKey]
// (wrapped) when the request has no such body — another content type, a
// body over MaxFormBody, a body that is not valid form encoding, a view
// that exposes no body — or the field is absent or empty; values are
// passed through [Bound]. Multipart forms are not read.
//
// Safe for: counting by an account name that the client chooses, as a
// login form's; a client can send any username, so pair it with a per-IP
// check, or one client can spread its guesses over many accounts (and
// lock a victim's account out by guessing wrong on purpose: give that
// limit a short window). name must be a plain field name.
func FormField(name string) (Func, error) {
	if name == "" || strings.ContainsAny(name, "&=%+ ") {
		return nil, fmt.Errorf("keyfuncs: FormField needs a plain form field name, got %q", name)
	}
	return func(r Request) (string, error) {
		if !isForm(r.Header("Content-Type")) {
			return "", errNoForm
		}
		var body []byte
		switch v := r.(type) {
		case HTTPRequester:
			hr := v.HTTP()
			if hr == nil || hr.Body == nil || hr.Body == http.NoBody {
				return "", errNoForm
			}
			b, err := io.ReadAll(io.LimitReader(hr.Body, MaxFormBody+1))
			// put back what was read before the rest, for the handler
			hr.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(b), hr.Body), Closer: hr.Body}
			if err != nil {
				return "", fmt.Errorf("%w: reading the form body: %v", ErrNoKey, err)
			}
			body = b
		case BodyRequester:
			body = v.Body()
		default:
			return "", errNoForm
		}
		if len(body) > MaxFormBody {
			return "", errFormTooLong
		}
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return "", errBadForm
		}
		s := strings.TrimSpace(vals.Get(name))
		if s == "" {
			return "", errNoField
		}
		return Bound(s), nil
	}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

func isForm(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded")
}

var (
	errNoForm      = fmt.Errorf("%w: no application/x-www-form-urlencoded body", ErrNoKey)
	errFormTooLong = fmt.Errorf("%w: form body over %d bytes", ErrNoKey, MaxFormBody)
	errBadForm     = fmt.Errorf("%w: the body is not valid form encoding", ErrNoKey)
	errNoField     = fmt.Errorf("%w: form field absent or empty", ErrNoKey)
)
