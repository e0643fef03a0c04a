package nethttp

import (
	"net/http"

	"github.com/limitkit/limitkit/httplimit"
)

// Identity returns the identity the middleware charged r under: the
// client key of its [httplimit.WithKey] function (a login form's username with
// keyfuncs.FormField), as [httplimit.Identity] reads it from r's context,
// where a middleware with httplimit.WithIdentity puts it before calling
// the handler. A login handler checks the password of exactly this
// username, and refuses the request when Identity reports false (no
// limiter, no WithIdentity, an IP key, the fallback key), so that the count and the check never see different
// usernames. See httplimit.Identity for the bound on its length.
func Identity(r *http.Request) (string, bool) { return httplimit.Identity(r.Context()) }
