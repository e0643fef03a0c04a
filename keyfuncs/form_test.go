package keyfuncs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/keyfuncs"
)

const urlencoded = "application/x-www-form-urlencoded"

func formRequest(body, ct string) *httptestRequest {
	return formRequestTo("/login", body, ct)
}

func formRequestTo(target, body, ct string) *httptestRequest {
	r := httptest.NewRequest("POST", target, strings.NewReader(body))
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	return &httptestRequest{r: r}
}

type httptestRequest struct{ r *http.Request }

// multipartBody is a multipart/form-data body of the fields (name,
// value pairs) and its content type.
func multipartBody(t testing.TB, fields ...string) (string, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i < len(fields); i += 2 {
		require.NoError(t, mw.WriteField(fields[i], fields[i+1]))
	}
	require.NoError(t, mw.Close())
	return b.String(), mw.FormDataContentType()
}

// bodyView is a request view that holds its body in memory, as
// fiberlimit's does (keyfuncs.BodyRequester).
type bodyView struct {
	keyfuncs.Request // not an HTTPRequester
	body             []byte
}

func (v bodyView) Body() []byte { return v.body }

// refusal is err's Refusal status, or 0.
func refusal(err error) int {
	var r *keyfuncs.Refusal
	if errors.As(err, &r) {
		return r.Status
	}
	return 0
}

// TestFormField: the urlencoded and multipart bodies give the field's
// value; no field gives ErrNoKey; everything the key cannot read as a
// framework would is refused with its status, never ErrNoKey (which a
// middleware would key by the IP instead); the handler reads the whole
// body afterwards, as sent.
func TestFormField(t *testing.T) {
	_, err := keyfuncs.FormField("a=b")
	require.Error(t, err)
	user, err := keyfuncs.FormField("username")
	require.NoError(t, err)
	mp, mpType := multipartBody(t, "username", "alice", "password", "x")
	mpDup, mpDupType := multipartBody(t, "username", "alice", "username", "mallory")
	mpSame, mpSameType := multipartBody(t, "username", "alice", "username", "alice")
	mpNone, mpNoneType := multipartBody(t, "password", "x")
	var fb bytes.Buffer
	fw := multipart.NewWriter(&fb)
	part, _ := fw.CreateFormFile("username", "u.txt")
	_, _ = part.Write([]byte("alice"))
	_ = fw.Close()
	var many []string // maxFormParts-1 other fields
	for i := range 64 - 1 {
		many = append(many, fmt.Sprintf("f%d", i), "x")
	}
	mpAtBound, mpAtBoundType := multipartBody(t, append(many, "username", "alice")...)
	mpMany, mpManyType := multipartBody(t, append(many, "f", "x", "username", "alice")...)
	const ok, noKey = 0, -1
	for _, c := range []struct {
		name, target, body, ct string
		hdr                    []string
		want                   string
		status                 int // ok, noKey or the refusal's
	}{
		{"field", "/login", "username=alice&password=x", urlencoded, nil, "alice", ok},
		{"charset param", "/login", "username=bob", urlencoded + "; charset=utf-8", nil, "bob", ok},
		{"media type case", "/login", "username=bob", "Application/X-WWW-Form-Urlencoded", nil, "bob", ok},
		{"escaped", "/login", "username=a%20b", urlencoded, nil, "a b", ok},
		{"escaped name", "/login", "user%6eame=carol", urlencoded, nil, "carol", ok},
		{"same value twice", "/login", "username=alice&username=alice", urlencoded, nil, "alice", ok},
		{"empty query value", "/login?username=", "username=alice", urlencoded, nil, "alice", ok},
		{"other query fields", "/login?next=/home", "username=alice", urlencoded, nil, "alice", ok},
		{"multipart", "/login", mp, mpType, nil, "alice", ok},
		{"multipart same value twice", "/login", mpSame, mpSameType, nil, "alice", ok},
		{"multipart maxFormParts parts", "/login", mpAtBound, mpAtBoundType, nil, "alice", ok},
		{"identity encoding", "/login", "username=alice", urlencoded, []string{"Content-Encoding", "identity"}, "alice", ok},

		{"no field", "/login", "password=x", urlencoded, nil, "", noKey},
		{"blank field", "/login", "username=+%20&password=x", urlencoded, nil, "", noKey},
		{"multipart no field", "/login", mpNone, mpNoneType, nil, "", noKey},
		{"no body", "/login", "", urlencoded, nil, "", noKey},
		{"no body, json", "/login", "", "application/json", nil, "", noKey},

		{"in the query", "/login?username=victim", "username=decoy", urlencoded, nil, "", 400},
		{"in the query only", "/login?username=victim", "password=x", urlencoded, nil, "", 400},
		{"in the query, escaped name", "/login?user%6eame=victim", "username=decoy", urlencoded, nil, "", 400},
		{"bad escape", "/login", "username=victim&x=%zz", urlencoded, nil, "", 400},
		{"bad escape in the field", "/login", "username=%zz", urlencoded, nil, "", 400},
		{"semicolon", "/login", "username=victim;x=1", urlencoded, nil, "", 400},
		{"conflicting values", "/login", "username=decoy&username=victim", urlencoded, nil, "", 400},
		{"multipart conflicting values", "/login", mpDup, mpDupType, nil, "", 400},
		{"multipart field as a file", "/login", fb.String(), fw.FormDataContentType(), nil, "", 400},
		{"multipart without boundary", "/login", mp, "multipart/form-data", nil, "", 400},
		{"multipart broken", "/login", mp[:len(mp)/2], mpType, nil, "", 400},
		{"oversized", "/login", "username=alice&p=" + strings.Repeat("x", formBodyMax), urlencoded, nil, "", 413},
		{"multipart maxFormParts+1 parts", "/login", mpMany, mpManyType, nil, "", 413},
		{"json", "/login", `{"username":"alice"}`, "application/json", nil, "", 415},
		{"no content type", "/login", "username=alice", "", nil, "", 415},
		{"media type suffix", "/login", "username=alice", urlencoded + "x", nil, "", 415},
		{"gzip", "/login", "username=alice", urlencoded, []string{"Content-Encoding", "gzip"}, "", 415},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(t *testing.T, k string, err error) {
				t.Helper()
				switch c.status {
				case ok:
					require.NoError(t, err)
					assert.Equal(t, c.want, k)
				case noKey:
					assert.True(t, errors.Is(err, keyfuncs.ErrNoKey), "%v", err)
					assert.Zero(t, refusal(err), "not a refusal: %v", err)
				default:
					assert.Equal(t, c.status, refusal(err), "%v", err)
					assert.False(t, errors.Is(err, keyfuncs.ErrNoKey), "a refusal is not ErrNoKey: %v", err)
				}
			}
			r := formRequestTo(c.target, c.body, c.ct)
			for i := 0; i < len(c.hdr); i += 2 {
				r.r.Header.Set(c.hdr[i], c.hdr[i+1])
			}
			k, err := user(keyfuncs.FromHTTP(r.r))
			check(t, k, err)
			// the handler reads the whole body, as sent
			b, err := io.ReadAll(r.r.Body)
			require.NoError(t, err)
			assert.Equal(t, c.body, string(b))
			// a view holding the body in memory (fiber's) reads alike
			r = formRequestTo(c.target, "", c.ct)
			for i := 0; i < len(c.hdr); i += 2 {
				r.r.Header.Set(c.hdr[i], c.hdr[i+1])
			}
			k, err = user(bodyView{keyfuncs.FromHTTP(r.r), []byte(c.body)})
			check(t, k, err)
		})
	}
}

// TestFormFieldTrimsWhitespace: surrounding whitespace is not part of the
// key, so " alice\t" and "alice" share one count.
func TestFormFieldTrimsWhitespace(t *testing.T) {
	user := mustFormField(t)
	for _, body := range []string{"username=+alice%09", "username=%20alice", "username=alice+"} {
		k, err := user(keyfuncs.FromHTTP(formRequest(body, urlencoded).r))
		require.NoError(t, err, body)
		assert.Equal(t, "alice", k, body)
	}
}

// TestFormFieldBodyBound: a body of exactly formBodyMax bytes is read; one
// byte more is refused with 413, whether the length is declared or not.
func TestFormFieldBodyBound(t *testing.T) {
	user := mustFormField(t)
	at := "username=alice&p="
	at += strings.Repeat("x", formBodyMax-len(at))
	require.Len(t, at, formBodyMax)
	for _, declared := range []bool{true, false} {
		for _, c := range []struct {
			body   string
			status int
		}{{at, 0}, {at + "x", 413}} {
			r := formRequest(c.body, urlencoded)
			if !declared {
				r.r.ContentLength = -1 // chunked
			}
			k, err := user(keyfuncs.FromHTTP(r.r))
			if c.status == 0 {
				require.NoError(t, err, "declared %v, %d bytes", declared, len(c.body))
				assert.Equal(t, "alice", k)
			} else {
				assert.Equal(t, c.status, refusal(err), "declared %v, %d bytes: %v", declared, len(c.body), err)
			}
			b, _ := io.ReadAll(r.r.Body)
			assert.Equal(t, len(c.body), len(b), "the handler reads the whole body")
			// fiber's view, the body in memory
			k, err = user(bodyView{keyfuncs.FromHTTP(formRequest("", urlencoded).r), []byte(c.body)})
			if c.status == 0 {
				assert.Equal(t, "alice", k)
			} else {
				assert.Equal(t, c.status, refusal(err))
			}
		}
	}
}

// TestFormFieldParsedBefore: a form an earlier middleware parsed is read
// from r.PostForm, what the handler reads.
func TestFormFieldParsedBefore(t *testing.T) {
	user := mustFormField(t)
	r := formRequest("username=alice", urlencoded)
	require.NoError(t, r.r.ParseForm())
	k, err := user(keyfuncs.FromHTTP(r.r))
	require.NoError(t, err)
	assert.Equal(t, "alice", k)
	r = formRequest("username=a&username=b", urlencoded)
	require.NoError(t, r.r.ParseForm())
	_, err = user(keyfuncs.FromHTTP(r.r))
	assert.Equal(t, 400, refusal(err))
}

// TestFirstOfStopsAtRefusal: FirstOf never replaces a refused identity by
// the next function's key.
func TestFirstOfStopsAtRefusal(t *testing.T) {
	user := mustFormField(t)
	f := keyfuncs.FirstOf(user, func(keyfuncs.Request) (string, error) { return "ip", nil })
	_, err := f(keyfuncs.FromHTTP(formRequest("username=%zz", urlencoded).r))
	assert.Equal(t, 400, refusal(err), "%v", err)
	k, err := f(keyfuncs.FromHTTP(formRequest("password=x", urlencoded).r))
	require.NoError(t, err)
	assert.Equal(t, "ip", k, "no field: the next function keys")
}

func FuzzFormField(f *testing.F) {
	f.Add("username=alice&password=x")
	f.Add("username=%zz&username=b")
	user, err := keyfuncs.FormField("username")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body string) {
		r := formRequest(body, urlencoded)
		k, err := user(keyfuncs.FromHTTP(r.r))
		if err == nil && (k == "" || len(k) > 256 || k != strings.TrimSpace(k)) {
			t.Fatalf("key %q", k)
		}
		if err != nil && !errors.Is(err, keyfuncs.ErrNoKey) && refusal(err) == 0 {
			t.Fatalf("neither ErrNoKey nor a refusal: %v", err)
		}
		b, _ := io.ReadAll(r.r.Body)
		if string(b) != body {
			t.Fatalf("body changed")
		}
	})
}

// A login limit keyed by the username of the form; the handler still
// reads the form.
func ExampleFormField() {
	user, _ := keyfuncs.FormField("username")
	r := httptest.NewRequest("POST", "/login", strings.NewReader("username=alice&password=demo"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	key, _ := user(keyfuncs.FromHTTP(r))
	fmt.Println(key, r.PostFormValue("password"))
	// Output: alice demo
}

func mustFormField(t testing.TB) keyfuncs.Func {
	t.Helper()
	f, err := keyfuncs.FormField("username")
	require.NoError(t, err)
	return f
}

// endless is a body of endless 'x' bytes that counts what was read.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += len(p)
	return len(p), nil
}

// TestFormFieldReadsAtMostTheBound: a hostile body of unbounded length,
// declared or not, costs at most formBodyMax+1 bytes read (none when its
// declared length is over the bound) and is refused with 413.
func TestFormFieldReadsAtMostTheBound(t *testing.T) {
	user := mustFormField(t)
	for _, length := range []int64{-1, 1 << 40} {
		body := &endless{}
		r := httptest.NewRequest("POST", "/login", io.MultiReader(strings.NewReader("username=alice&p="), body))
		r.Header.Set("Content-Type", urlencoded)
		r.ContentLength = length
		_, err := user(keyfuncs.FromHTTP(r))
		assert.Equal(t, 413, refusal(err), "%v", err)
		if length < 0 {
			assert.Equal(t, formBodyMax+1, body.n+len("username=alice&p="), "bytes read")
		} else {
			assert.Zero(t, body.n, "a declared length over the bound is not read")
		}
	}
}

// formBodyMax is the body FormField reads at most (64 KiB, its
// documented bound).
const formBodyMax = 64 << 10
