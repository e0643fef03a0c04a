package fiber3limit

import (
	"context"
	"reflect"

	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
)

// This file is every call the package makes into httplimit's engine, so
// that a change of the adapter-author API touches one small file.

// adapter is this package to the engine: an HTTP adapter that reads its
// WithDenyHandler and reports outcomes.
var adapter = httplimit.Adapter{
	Name:    "fiber3limit",
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

// setHeaders writes res's rate-limit fields into h.
func (g *engine) setHeaders(res *decision, h *fasthttp.ResponseHeader) {
	var f httplimit.Fields
	g.e.Fields(res, &f)
	for i := 0; i < f.Len(); i++ {
		name, dyn, static := f.At(i)
		if static != "" {
			h.Set(name, static)
		} else {
			h.SetBytesV(name, dyn)
		}
	}
}

func (g *engine) reject(res *decision) httplimit.Rejection { return g.e.Reject(res) }

func identityOf(res *decision) (string, bool) { return res.Identity() }

// Outcome sentinels (see httplimit.WithOutcome).
const (
	outcomeUnwritten = httplimit.OutcomeUnwritten
	outcomePanic     = httplimit.OutcomePanic
)

func (g *engine) settle(ctx context.Context, res *decision, status int) {
	g.e.Outcome(ctx, res, status)
}
