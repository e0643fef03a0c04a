package keyfuncs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxFormBody bounds the request body [FormField] reads (64 KiB): a
// longer body (by its Content-Length, or once maxFormBody+1 bytes were
// read) is refused with 413, never keyed by another key. The bytes read
// are put back for the handler.
const maxFormBody = 64 << 10

// maxFormParts bounds the parts of a multipart/form-data body [FormField]
// reads: a body with more is refused with 413.
const maxFormParts = 64

// HTTPRequester is implemented by request views backed by a *http.Request:
// [FromHTTP]'s and the views of ginlimit and echolimit. [FormField] reads
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

// Refusal is the error of a key function that cannot read the identity a
// request may carry the way the handler would read it: an encoding it
// does not parse, a body over its bound, malformed escaping, the
// identity in a place it does not read, conflicting values. It is
// neither [ErrNoKey] nor invalid key material that a weaker key may
// replace: the middleware refuses the request with Status and an RFC
// 9457 problem carrying Detail (httplimit.ReasonRefused), whatever
// WithNoKeySkip or WithNoKeyDeny says, without counting it or trying the fallback key, and
// [FirstOf] returns it without trying the next function. Status is a 4xx
// status (400, 413, 415); Detail is safe to show to the client. Test
// for it with errors.As.
type Refusal struct {
	Status int
	Detail string
}

// Error implements error.
func (r *Refusal) Error() string {
	return "keyfuncs: request refused (" + strconv.Itoa(r.Status) + "): " + r.Detail
}

// refused reports whether err is (or wraps) a [Refusal].
func refused(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// FormField keys the request by a field of its form body (a login form's
// "username"), so that failed logins are counted per account. It reads
// the body as the frameworks' own form parsing does, and refuses (a
// [Refusal]) every request whose field it cannot read that way, so that
// a handler never checks a password for a username the limiter did not
// count:
//
//   - application/x-www-form-urlencoded bodies and multipart/form-data
//     bodies (fields, not files) are read, up to 64 KiB (65,536 bytes) and
//     64 parts: a longer body is refused with 413 Content Too
//     Large;
//   - only the body is read: a request whose query string also carries
//     the field (non-empty) is refused with 400 (frameworks disagree on
//     which wins: net/http and echo prefer the body, fiber the query);
//   - a body that is not valid form encoding (a bad %-escape, a ';'
//     separator, a broken multipart body, the field sent as a file) and
//     a field sent twice with different values are refused with 400;
//   - a non-empty body of another content type (JSON, none, a
//     Content-Encoding such as gzip), or on a request view that exposes
//     no body, is refused with 415 Unsupported Media Type.
//
// An empty body, or a readable form without the field (or with only
// whitespace in it), has no key: [ErrNoKey] (wrapped), which the
// middleware handles as a missing key (the fallback key, WithNoKeySkip or
// WithNoKeyDeny). The value's surrounding whitespace
// is trimmed and it is passed through [Bound] (a value over 128 bytes or
// outside printable ASCII keys by its digest). The body is put back, byte
// for byte, for the handler (net/http, gin, echo: r.Body is replaced by
// a reader of the same bytes; fiber keeps its body in memory and nothing
// is consumed); a body an earlier middleware already parsed
// (r.PostForm set) is read from r.PostForm.
//
// Handlers should check the password against the identity the limiter
// charged (with httplimit.WithIdentity: httplimit.Identity and each
// adapter's Identity) rather than
// parse the username again: then no parser difference can split them.
//
// Safe for: counting by an account name that the client chooses, as a
// login form's; a client can send any username, so pair it with a per-IP
// check, or one client can spread its guesses over many accounts (and
// lock a victim's account out by guessing wrong on purpose: give that
// limit a short window). name must be a plain field name. The returned
// Func is safe for concurrent use.
func FormField(name string) (Func, error) {
	if name == "" || strings.ContainsAny(name, "&=%+;\" \t\r\n") {
		return nil, fmt.Errorf("keyfuncs: FormField needs a plain form field name, got %q", name)
	}
	f := &formField{
		name:      name,
		inQuery:   &Refusal{http.StatusBadRequest, fmt.Sprintf("The form field %q must be sent in the request body only, not in the query string.", name)},
		conflict:  &Refusal{http.StatusBadRequest, fmt.Sprintf("The form field %q is sent more than once with different values.", name)},
		asFile:    &Refusal{http.StatusBadRequest, fmt.Sprintf("The form field %q is sent as a file.", name)},
		malformed: &Refusal{http.StatusBadRequest, "The request body is not valid form encoding."},
		tooLarge:  &Refusal{http.StatusRequestEntityTooLarge, fmt.Sprintf("The form body is over %d bytes or %d parts.", maxFormBody, maxFormParts)},
		mediaType: &Refusal{http.StatusUnsupportedMediaType, "The request body must be application/x-www-form-urlencoded or multipart/form-data, without Content-Encoding."},
		noField:   fmt.Errorf("%w: form field %q absent or empty", ErrNoKey, name),
	}
	return f.key, nil
}

type formField struct {
	name                                                      string
	inQuery, conflict, asFile, malformed, tooLarge, mediaType *Refusal
	noField                                                   error
}

func (f *formField) key(r Request) (string, error) {
	if r.Query(f.name) != "" {
		return "", f.inQuery
	}
	ct := r.Header("Content-Type")
	var body []byte
	switch v := r.(type) {
	case HTTPRequester:
		hr := v.HTTP()
		if hr == nil {
			return "", errNoForm
		}
		if hr.PostForm != nil { // parsed before: what the handler reads
			return f.pick(hr.PostForm[f.name])
		}
		if hr.Body == nil || hr.Body == http.NoBody {
			break
		}
		if hr.ContentLength > maxFormBody {
			return "", f.tooLarge
		}
		b, err := io.ReadAll(io.LimitReader(hr.Body, maxFormBody+1))
		// put back what was read before the rest, for the handler
		hr.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(b), hr.Body), Closer: hr.Body}
		if err != nil {
			return "", fmt.Errorf("%w: reading the form body: %v", ErrNoKey, err)
		}
		body = b
	case BodyRequester:
		body = v.Body()
	default:
		if ct != "" {
			return "", f.mediaType // a body this view cannot show
		}
		return "", errNoForm
	}
	if len(body) == 0 {
		return "", errNoForm
	}
	if len(body) > maxFormBody {
		return "", f.tooLarge
	}
	if ce := r.Header("Content-Encoding"); ce != "" && !strings.EqualFold(strings.TrimSpace(ce), "identity") {
		return "", f.mediaType
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", f.mediaType
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return "", f.malformed
		}
		return f.pick(vals[f.name])
	case "multipart/form-data":
		return f.multipart(body, params["boundary"])
	}
	return "", f.mediaType
}

// multipart reads the field's values from a multipart/form-data body as
// mime/multipart's Reader.ReadForm does (which net/http and fasthttp
// use): parts by form name, quoted-printable decoded, files apart.
func (f *formField) multipart(body []byte, boundary string) (string, error) {
	if boundary == "" {
		return "", f.malformed
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var vals []string
	for n := 0; ; n++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", f.malformed
		}
		if n >= maxFormParts {
			return "", f.tooLarge
		}
		if p.FormName() != f.name {
			continue
		}
		if p.FileName() != "" {
			return "", f.asFile
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return "", f.malformed
		}
		vals = append(vals, string(b))
	}
	return f.pick(vals)
}

// pick is the key of the field's values: refused when they differ, no
// key when there are none or the value is blank.
func (f *formField) pick(vals []string) (string, error) {
	if len(vals) == 0 {
		return "", f.noField
	}
	for _, v := range vals[1:] {
		if v != vals[0] {
			return "", f.conflict
		}
	}
	s := strings.TrimSpace(vals[0])
	if s == "" {
		return "", f.noField
	}
	return Bound(s), nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

var errNoForm = fmt.Errorf("%w: no form body", ErrNoKey)
