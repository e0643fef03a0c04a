package fiberlimit

import "github.com/gofiber/fiber/v2"

// identityLocal is the c.Locals key of the identity.
type identityLocal struct{}

// Identity returns the identity the middleware charged c's request under:
// the client key of its [httplimit.WithKey] function (a login form's username with
// keyfuncs.FormField), which a middleware with httplimit.WithIdentity
// stores in c.Locals before calling c.Next. A login handler checks the
// password of exactly this username, and refuses the request when
// Identity reports false (no limiter, no WithIdentity, an IP key, the
// fallback key), so that the count and the check
// never see different usernames (fiber's c.FormValue reads the query
// string before the body; the form key reads only the body). See
// httplimit.Identity for the bound on its length.
func Identity(c *fiber.Ctx) (string, bool) {
	if c == nil {
		return "", false
	}
	id, ok := c.Locals(identityLocal{}).(string)
	return id, ok && id != ""
}
