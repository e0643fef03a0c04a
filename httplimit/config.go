package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
)

// Option configures a middleware built by an adapter's New or
// NewMiddleware (or an [Engine] built by [NewAdapterEngine]). Options are
// applied in order; a later option overrides an earlier one of the same
// kind (except [WithCheck], which accumulates). An Option is immutable:
// one value may configure any number of middlewares, of any adapter —
// except one made by [AdapterOption] (a deny handler, an adapter's own
// counting by outcome), which only its own adapter accepts.
type Option func(*config)

// config is a middleware's configuration: what the options build, and
// what the [Engine] reads. It exists once: options write its fields and
// [NewAdapterEngine] reads them, with no copy in between. Its fields are
// unexported so that every value is validated by the option that sets it;
// code outside this package configures a middleware only through
// options. The zero value is not used directly: [NewAdapterEngine] starts from
// the defaults documented on each option.
type config struct {
	primary    keySpec
	extra      []checkSpec
	scope      *string
	scopeFunc  func(keyfuncs.Request) string
	skip       func(keyfuncs.Request) bool
	cost       func(keyfuncs.Request) int64
	noKey      noKeyMode
	fallback   keySpec
	headers    HeaderSet
	resetDelta bool
	degraded   string
	status     int
	bodyType   string
	body       []byte
	bodySet    bool
	onError    func(ctx context.Context, err error)
	clock      core.Clock
	inFlight   *core.InFlight
	conc       *core.Concurrency // WithConcurrency (inflight.go)
	identity   bool              // WithIdentity: the primary key reaches the handler
	pol        policySpec        // WithTiers, WithOverrides, WithOutcome (policies.go)
	adapter    []adapterValue
	httpOnly   []string // the options given that shape an HTTP response (see Adapter.NoHTTPResponse)
	errs       []error
}

// adapterValue is one AdapterOption: a value only adapter accepts.
type adapterValue struct {
	adapter, name string
	v             any
	outcome       bool // set by AdapterOption of an Outcome: counting by outcome
}

type keySpec struct {
	fn  keyfuncs.Func
	ip  *keyfuncs.Resolver
	set bool
}

type checkSpec struct {
	lim *core.Limiter
	key keySpec
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// newConfig applies opts over the defaults (every header of
// HeaderDefault, status 429), rejects what adapter a cannot honour
// (config.checkAdapter) and returns the first mistake, prefixed by the
// adapter's name.
func newConfig(a *Adapter, opts []Option) (*config, error) {
	c := &config{headers: HeaderDefault, status: http.StatusTooManyRequests}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%s: nil Option", a.Name)
		}
		o(c)
	}
	c.checkAdapter(a)
	if len(c.errs) > 0 {
		return nil, fmt.Errorf("%s: %w", a.Name, c.errs[0])
	}
	return c, nil
}

// AdapterOption returns an Option that only the adapter named adapter
// (its [Adapter.Name]) accepts, and only when it declares the option
// name ([Adapter.Options]): any other adapter's engine returns an error
// naming both, so that a handler written for one framework is never
// silently ignored by another, and the adapter itself rejects a name it
// does not declare or a value not assignable to the declared type. name
// is the option's name in the adapter's package ("WithDenyHandler"); v
// is its value, which the adapter reads back with [AdapterOptionValue].
// A nil v (or a nil function or pointer in
// v) is a mistake the engine reports. The adapters' WithDenyHandler are
// built on it:
//
//	func WithDenyHandler(h DenyHandler) httplimit.Option {
//		return httplimit.AdapterOption("nethttp", "WithDenyHandler", h)
//	}
//
// A v of type [Outcome] is [WithOutcome] for an adapter whose outcomes
// are not HTTP statuses: o.Count sees the numbers the adapter passes to
// [Engine.Outcome] (grpclimit.WithOutcome counts by gRPC code). The
// option's value is then o.Count: the adapter declares name with the
// type func(int) bool and reads it back with AdapterOptionValue. Given
// together with WithOutcome, in either order, it is a construction
// error: one Count would see the other's numbering. A nil o.Count is a
// mistake the engine reports.
func AdapterOption(adapter, name string, v any) Option {
	if o, ok := v.(Outcome); ok {
		return adapterOutcome(adapter, name, o)
	}
	isNil := v == nil
	if !isNil {
		switch rv := reflect.ValueOf(v); rv.Kind() {
		case reflect.Func, reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Chan:
			isNil = rv.IsNil()
		}
	}
	return func(c *config) {
		if isNil {
			c.fail("%s.%s(nil): pass a value, or leave the option out", adapter, name)
			return
		}
		c.setAdapterValue(adapter, name, v)
	}
}

// setAdapterValue sets the value of adapter's option name to v, in place
// of an earlier one, and returns its entry.
func (c *config) setAdapterValue(adapter, name string, v any) *adapterValue {
	for i := range c.adapter {
		if c.adapter[i].adapter == adapter && c.adapter[i].name == name {
			c.adapter[i].v, c.adapter[i].outcome = v, false
			return &c.adapter[i]
		}
	}
	c.adapter = append(c.adapter, adapterValue{adapter: adapter, name: name, v: v})
	return &c.adapter[len(c.adapter)-1]
}

var errNoLimiter = errors.New("nil *core.Limiter: build one with core.NewLimiter(memstore.MustNew(), policy)")
