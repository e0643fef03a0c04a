// Package adaptertest is the conformance suite every limitkit framework
// adapter passes: the same scenarios driven through net/http, gin, echo and
// fiber, asserting the same status codes, headers, bodies and store keys.
//
// A [Harness] adapts one framework: it builds an app from an [App] spec
// (routes, a global middleware, per-route middlewares) and serves
// [Request]s from a chosen TCP peer. [Run] drives every scenario; each
// adapter package runs it once with its own harness (its TestConformance),
// and this package's tests do not run the scenarios again.
package adaptertest

import (
	"net/http"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// Mw is one middleware: a limiter and options.
type Mw struct {
	Limiter *core.Limiter
	Opts    []httplimit.Option
}

// Route is one endpoint. Path uses the ":param" syntax; harnesses convert.
// Method is one method, or [AnyMethod] or [GetHead].
type Route struct {
	Method, Path string
	Mw           *Mw // per-route middleware, or nil
}

// Route methods that harnesses register the framework's own way.
const (
	// AnyMethod is a route for every method: a net/http pattern without a
	// method, gin's r.Any, echo's e.Any, fiber's app.All.
	AnyMethod = "*"
	// GetHead is a GET route that serves HEAD too: a net/http "GET /x"
	// pattern (which serves HEAD), gin's r.GET and r.HEAD, echo's e.GET
	// and e.HEAD, fiber's app.Get (which registers HEAD).
	GetHead = "GET+HEAD"
)

// App is what a harness builds. Every route answers 200 "ok".
type App struct {
	Global *Mw // around everything, or nil
	Routes []Route
}

// Request is one request to an app.
type Request struct {
	Method, Target string
	Peer           string // "ip:port"; the TCP peer the server sees
	Header         map[string]string
	Body           string // the request body, none when empty
}

// Response is what came back. Header keys are canonical.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Client serves requests against a built app.
type Client func(Request) Response

// Harness adapts one framework to the suite.
type Harness struct {
	// Name names the framework in subtests.
	Name string
	// Build builds the app.
	Build func(App) (Client, error)
	// Scope is the default key scope the adapter derives for a route
	// (method, ":param" path): "GET /users/:id", or for net/http
	// "GET /users/{id}"; for a route of every method (method "") the
	// path alone.
	Scope func(method, path string) string
	// CustomDeny is the adapter's WithDenyHandler with the suite's handler:
	// status 418, header X-Denied: <reason>, body
	// "denied:<reason>:<policy>:<retry>".
	CustomDeny func() httplimit.Option
}
