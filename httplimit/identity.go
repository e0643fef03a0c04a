package httplimit

import "context"

type identityKey struct{}

// Identity returns the identity the rate limiter charged the request
// under, from the request's context: the client key of the primary
// check's [WithKey] function ([Result.Identity]). Every HTTP adapter
// (nethttp, ginlimit, echolimit: the *http.Request's context; fiberlimit:
// see fiberlimit.Identity) puts it there before calling the handler of
// an admitted request, so that the handler acts on exactly the identity
// that was counted: a login handler checks the password of this
// username, not of one it parses again from the request (a parser
// difference — query against body, urlencoded against multipart, a
// duplicate field — would otherwise split the count from the check).
//
// It reports false when the request went through no limiter, one
// without [WithIdentity], or the limiter's primary check was keyed by an IP (the default, [WithIPKey]),
// by the fallback key, or skipped: a handler that relies on the identity
// must then refuse the request rather than read one of its own. The
// identity is a key function's output: bounded (keyfuncs.Bound), so a
// value over 128 bytes or outside printable ASCII is a digest
// ("~" and 32 hex digits), never the raw value. Safe for concurrent use.
func Identity(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	id, ok := ctx.Value(identityKey{}).(string)
	return id, ok && id != ""
}

// ContextWithIdentity returns ctx carrying id for [Identity]: what an
// adapter does for an admitted request whose [Result.Identity] reports
// true (and what a test of a handler does to stand in for the limiter).
func ContextWithIdentity(ctx context.Context, id string) context.Context {
	return &identityCtx{Context: ctx, id: id}
}

// identityCtx is context.WithValue(ctx, identityKey{}, id) in one
// allocation: the string is boxed only when Identity asks for it.
type identityCtx struct {
	context.Context
	id string
}

func (c *identityCtx) Value(key any) any {
	if _, ok := key.(identityKey); ok {
		return c.id
	}
	return c.Context.Value(key)
}
