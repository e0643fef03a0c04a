package ginlimit

import (
	"github.com/gin-gonic/gin"

	"github.com/limitkit/limitkit/httplimit"
)

// Identity returns the identity the middleware charged c's request under:
// the client key of its [httplimit.WithKey] function (a login form's username with
// keyfuncs.FormField), which a middleware with httplimit.WithIdentity
// puts on c.Request's context ([httplimit.Identity]) before the rest of
// the chain runs. A login handler checks the password of exactly this
// username, and refuses the request when Identity reports false (no
// limiter, no WithIdentity, an IP key, the fallback key), so that the count and the check never see different
// usernames. See httplimit.Identity for the bound on its length.
func Identity(c *gin.Context) (string, bool) {
	if c == nil || c.Request == nil {
		return "", false
	}
	return httplimit.Identity(c.Request.Context())
}
