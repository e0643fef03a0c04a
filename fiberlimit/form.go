package fiberlimit

// Body implements keyfuncs.BodyRequester: fasthttp holds the body in
// memory, so keyfuncs.FormField reads it without consuming anything (as
// sent: a compressed body is not decoded).
func (r *request) Body() []byte { return r.ctx().Request().Body() }
