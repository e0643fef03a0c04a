package keyfuncs_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/keyfuncs"
)

func formRequest(body, ct string) *httptestRequest {
	r := httptest.NewRequest("POST", "/login", strings.NewReader(body))
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	return &httptestRequest{r: r}
}

type httptestRequest struct{ r *http.Request }

func TestFormField(t *testing.T) {
	_, err := keyfuncs.FormField("a=b")
	require.Error(t, err)
	user, err := keyfuncs.FormField("username")
	require.NoError(t, err)
	for _, c := range []struct {
		name, body, ct, want string
	}{
		{"field", "username=alice&password=x", "application/x-www-form-urlencoded", "alice"},
		{"charset param", "username=bob", "application/x-www-form-urlencoded; charset=utf-8", "bob"},
		{"escaped", "username=a%20b", "application/x-www-form-urlencoded", "a b"},
		{"no field", "password=x", "application/x-www-form-urlencoded", ""},
		{"json", `{"username":"alice"}`, "application/json", ""},
		{"no content type", "username=alice", "", ""},
		{"malformed", "username=%zz", "application/x-www-form-urlencoded", ""},
		{"oversized", "username=alice&p=" + strings.Repeat("x", keyfuncs.MaxFormBody), "application/x-www-form-urlencoded", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := formRequest(c.body, c.ct)
			k, err := user(keyfuncs.FromHTTP(r.r))
			if c.want == "" {
				assert.True(t, errors.Is(err, keyfuncs.ErrNoKey), "%v", err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, c.want, k)
			}
			// the handler reads the whole body, as sent
			b, err := io.ReadAll(r.r.Body)
			require.NoError(t, err)
			assert.Equal(t, c.body, string(b))
		})
	}
}

func FuzzFormField(f *testing.F) {
	f.Add("username=alice&password=x")
	f.Add("username=%zz&username=b")
	user, err := keyfuncs.FormField("username")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body string) {
		r := formRequest(body, "application/x-www-form-urlencoded")
		k, err := user(keyfuncs.FromHTTP(r.r))
		if err == nil && (k == "" || len(k) > 256) {
			t.Fatalf("key %q", k)
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
