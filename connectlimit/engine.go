package connectlimit

import (
	"context"
	"net/http"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// This file is every call the package makes into httplimit's engine, so
// that a change of the adapter-author API touches one small file.

// adapter is this package to the engine: it answers a denial with a
// Connect error, not an HTTP response of its own, and reports outcomes.
var adapter = httplimit.Adapter{
	Name:           "connectlimit",
	Outcome:        true,
	NoHTTPResponse: true,
	Denials: "connectlimit answers a denial with a Connect error: CodeResourceExhausted with the RetryInfo " +
		"detail and Retry-After (see connectlimit.Interceptor); wrap the interceptor to change it",
}

// engine is the engine and what the interceptor asks of it once.
type engine struct {
	e        *httplimit.Engine
	inflight *core.InFlight
	outcome  bool
}

func newEngine(l *core.Limiter, opts []httplimit.Option) (*engine, error) {
	e, err := httplimit.NewAdapterEngine(adapter, l, opts...)
	if err != nil {
		return nil, err
	}
	return &engine{e: e, inflight: e.InFlight(), outcome: e.CountsOutcome()}, nil
}

// decision is one call's result.
type decision = httplimit.Result

func (g *engine) decide(ctx context.Context, req httplimit.Request, res *decision) {
	g.e.Decide(ctx, req, nil, res)
}

func skipped(res *decision) bool { return res.Action == httplimit.Skip }
func passed(res *decision) bool  { return res.Action == httplimit.Pass }

// setHeaders writes res's rate-limit fields (X-RateLimit-*, Retry-After,
// the IETF fields when chosen) into h.
func (g *engine) setHeaders(res *decision, h http.Header) { g.e.SetHTTP(res, h) }

func (g *engine) reject(res *decision) httplimit.Rejection { return g.e.Reject(res) }

// withIdentity is ctx carrying res's identity (httplimit.Identity), when
// it has one.
func withIdentity(ctx context.Context, res *decision) context.Context {
	if id, ok := res.Identity(); ok {
		return httplimit.ContextWithIdentity(ctx, id)
	}
	return ctx
}

const outcomePanic = httplimit.OutcomePanic

// The reasons of a denial.
const (
	reasonNoKey       = httplimit.ReasonNoKey
	reasonRefused     = httplimit.ReasonRefused
	reasonUnavailable = httplimit.ReasonUnavailable
)

func (g *engine) settle(ctx context.Context, res *decision, status int) {
	g.e.Outcome(ctx, res, status)
}
