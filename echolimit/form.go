package echolimit

import "net/http"

// HTTP implements keyfuncs.HTTPRequester: keyfuncs.FormField reads the
// body through it.
func (r *request) HTTP() *http.Request { return r.c.Request() }

// HTTP implements keyfuncs.HTTPRequester for the view of echo's own
// context type.
func (v *echoView) HTTP() *http.Request { return v.c().Request() }
