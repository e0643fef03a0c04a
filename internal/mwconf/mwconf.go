// Package mwconf carries a middleware's settings from the public package
// httplimit, whose options set them, to the engine (internal/limitmw),
// which reads them. httplimit.Config keeps its Settings unexported, so
// that users see an opaque Config; httplimit installs [Of] at init to
// hand them over.
package mwconf

import (
	"context"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
)

// KeySpec is a key function or an IP resolver; Set is false for the
// default (the peer IP).
type KeySpec struct {
	Fn  keyfuncs.Func
	IP  *keyfuncs.Resolver
	Set bool
}

// CheckSpec is one WithCheck: a limiter and its key.
type CheckSpec struct {
	Lim *core.Limiter
	Key KeySpec
}

// Settings is what the options build. The uint8 fields hold
// httplimit.NoKeyMode, HeaderSet and ResetFormat values (this package
// cannot import httplimit, which imports it).
type Settings struct {
	Primary   KeySpec
	Extra     []CheckSpec
	Scope     *string
	ScopeFunc func(keyfuncs.Request) string
	Skip      func(keyfuncs.Request) bool
	Cost      func(keyfuncs.Request) int64
	NoKey     uint8
	Fallback  KeySpec
	Headers   uint8
	Reset     uint8
	Degraded  string
	Status    int
	BodyType  string
	Body      []byte
	BodySet   bool
	OnError   func(context.Context, error)
	Clock     core.Clock
	// InFlight counts the requests in the middleware (WithInFlight), or nil.
	InFlight *core.InFlight
	// DenyHandler is the adapter-specific denial handler, or nil.
	DenyHandler any
	// Policies holds WithTiers, WithOverrides and WithOutcome.
	Policies
	// Route is the adapter-specific route resolver (nethttp.WithRoute), or nil.
	Route any
	// Errs are the configuration mistakes, in option order.
	Errs []error
}

// Of returns the Settings inside cfg, an *httplimit.Config; installed by
// package httplimit at init.
var Of func(cfg any) *Settings

// Policies are the settings of the policies teams write (issue 26):
// limits chosen per request and counting by outcome.
type Policies struct {
	// Tier reads the request's tier (WithTiers), or nil.
	Tier keyfuncs.Func
	// Tiers maps a tier to its limiter (WithTiers).
	Tiers map[string]*core.Limiter
	// Overrides maps a client key to its limiter (WithOverrides).
	Overrides map[string]*core.Limiter
	// Count reports whether a response status counts (WithOutcome); nil:
	// every request counts at the decision.
	Count func(status int) bool
	// ResetOnSuccess and ChargeFirst are WithOutcome's.
	ResetOnSuccess bool
	ChargeFirst    bool
}
