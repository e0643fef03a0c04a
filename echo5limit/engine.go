package echo5limit

import (
	"context"
	"net/http"
	"reflect"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// This file is every call the package makes into httplimit's engine, so
// that a change of the adapter-author API touches one small file.

// adapter is this package to the engine: an HTTP adapter that reads its
// WithDenyHandler and reports outcomes.
var adapter = httplimit.Adapter{
	Name:    "echo5limit",
	Options: map[string]reflect.Type{"WithDenyHandler": reflect.TypeFor[denyHandler]()},
	Outcome: true,
}

// engine is the engine with the adapter options this package reads.
type engine struct {
	e        *httplimit.Engine
	deny     denyHandler
	inflight *core.InFlight
	outcome  bool
}

func newEngine(l *core.Limiter, opts []httplimit.Option) (*engine, error) {
	e, err := httplimit.NewAdapterEngine(adapter, l, opts...)
	if err != nil {
		return nil, err
	}
	deny, err := httplimit.AdapterOptionValue[denyHandler](e, "WithDenyHandler")
	if err != nil {
		return nil, err
	}
	return &engine{e: e, deny: deny, inflight: e.InFlight(), outcome: e.CountsOutcome()}, nil
}

// decision is one request's result.
type decision = httplimit.Result

func (g *engine) decide(ctx context.Context, req httplimit.Request, res *decision) {
	g.e.Decide(ctx, req, nil, res)
}

func skipped(res *decision) bool { return res.Action == httplimit.Skip }
func passed(res *decision) bool  { return res.Action == httplimit.Pass }

func (g *engine) setHeaders(res *decision, h http.Header) { g.e.SetHTTP(res, h) }

func (g *engine) reject(res *decision) httplimit.Rejection { return g.e.Reject(res) }

// withIdentity is ctx carrying res's identity for Identity, when it has
// one.
func withIdentity(ctx context.Context, res *decision) (context.Context, bool) {
	id, ok := res.Identity()
	if !ok {
		return ctx, false
	}
	return httplimit.ContextWithIdentity(ctx, id), true
}

func identity(ctx context.Context) (string, bool) { return httplimit.Identity(ctx) }

// Outcome sentinels (see httplimit.WithOutcome).
const (
	outcomeUnwritten = httplimit.OutcomeUnwritten
	outcomePanic     = httplimit.OutcomePanic
)

func (g *engine) settle(ctx context.Context, res *decision, status int) {
	g.e.Outcome(ctx, res, status)
}

// fromHTTP is keyfuncs' view of r, for Query.
func query(r *http.Request, name string) string { return keyfuncs.FromHTTP(r).Query(name) }
