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
// NewMiddleware (or an [Engine] built by [NewEngine]). Options are
// applied in order; a later option overrides an earlier one of the same
// kind (except [WithCheck], which accumulates). An Option is immutable:
// one value may configure any number of middlewares, of any adapter —
// except one made by [AdapterOption] (a deny handler), which only its own
// adapter accepts.
type Option func(*Config)

// Config is a middleware's configuration: what the options build, and
// what the [Engine] reads. It exists once: options write its fields and
// [NewEngine] reads them, with no copy in between. Its fields are
// unexported so that every value is validated by the option that sets it;
// code outside this package configures a middleware only through
// options. The zero value is not used directly: [NewEngine] starts from
// the defaults documented on each option.
type Config struct {
	primary   keySpec
	extra     []checkSpec
	scope     *string
	scopeFunc func(keyfuncs.Request) string
	skip      func(keyfuncs.Request) bool
	cost      func(keyfuncs.Request) int64
	noKey     NoKeyMode
	fallback  keySpec
	headers   HeaderSet
	reset     ResetFormat
	degraded  string
	status    int
	bodyType  string
	body      []byte
	bodySet   bool
	onError   func(ctx context.Context, err error)
	clock     core.Clock
	inFlight  *core.InFlight
	pol       policySpec // WithTiers, WithOverrides, WithOutcome (policies.go)
	adapter   []adapterValue
	errs      []error
}

// adapterValue is one AdapterOption: a value only adapter accepts.
type adapterValue struct {
	adapter, name string
	v             any
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

func (c *Config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// newConfig applies opts over the defaults (every header of
// HeaderDefault, status 429) and returns the first mistake, prefixed by
// the adapter's name.
func newConfig(adapter string, opts []Option) (*Config, error) {
	c := &Config{headers: HeaderDefault, status: http.StatusTooManyRequests}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%s: nil Option", adapter)
		}
		o(c)
	}
	for _, a := range c.adapter {
		if a.adapter != adapter {
			c.fail("%s.%s is an option of package %s, given to a %s middleware: use the option of package %s",
				a.adapter, a.name, a.adapter, adapter, adapter)
		}
	}
	if len(c.errs) > 0 {
		return nil, fmt.Errorf("%s: %w", adapter, c.errs[0])
	}
	return c, nil
}

// AdapterOption returns an Option that only the adapter named adapter
// (the name it passes to [NewEngine]) accepts: any other adapter's
// NewEngine returns an error naming both, so that a handler written for
// one framework is never silently ignored by another. name is the
// option's name in the adapter's package ("WithDenyHandler"), for error
// messages; v is its value, which the adapter reads back with
// [Engine.AdapterValue]. A nil v (or a nil function or pointer in v) is a
// mistake the adapter's NewEngine reports. The adapters' WithDenyHandler
// are built on it:
//
//	func WithDenyHandler(h DenyHandler) httplimit.Option {
//		return httplimit.AdapterOption("nethttp", "WithDenyHandler", h)
//	}
func AdapterOption(adapter, name string, v any) Option {
	isNil := v == nil
	if !isNil {
		switch rv := reflect.ValueOf(v); rv.Kind() {
		case reflect.Func, reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Chan:
			isNil = rv.IsNil()
		}
	}
	return func(c *Config) {
		if isNil {
			c.fail("%s.%s(nil): pass a value, or leave the option out", adapter, name)
			return
		}
		for i := range c.adapter {
			if c.adapter[i].adapter == adapter && c.adapter[i].name == name {
				c.adapter[i].v = v
				return
			}
		}
		c.adapter = append(c.adapter, adapterValue{adapter: adapter, name: name, v: v})
	}
}

var errNoLimiter = errors.New("nil *core.Limiter: build one with core.NewLimiter(memstore.New(), policy)")
