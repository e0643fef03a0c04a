package echolimit

import "net/http"

// HTTP implements keyfuncs.HTTPRequester: keyfuncs.FormField reads the
// body through it.
func (r *request) HTTP() *http.Request { return r.c.Request() }
