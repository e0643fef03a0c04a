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

import "github.com/limitkit/limitkit/httplimit/adaptertest"

// The harness types are the public suite's (httplimit/adaptertest), so
// every harness here runs that suite too.
type (
	// Mw is one middleware: a limiter and options.
	Mw = adaptertest.Mw
	// Route is one endpoint (see adaptertest.Route).
	Route = adaptertest.Route
	// App is what a harness builds. Every route answers 200 "ok".
	App = adaptertest.App
	// Request is one request to an app.
	Request = adaptertest.Request
	// Response is what came back. Header keys are canonical.
	Response = adaptertest.Response
	// Client serves requests against a built app.
	Client = func(Request) Response
	// Harness adapts one framework to the suite.
	Harness = adaptertest.Harness
)

// Route methods that harnesses register the framework's own way.
const (
	AnyMethod = adaptertest.AnyMethod
	GetHead   = adaptertest.GetHead
)
