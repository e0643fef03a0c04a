package httplimit

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/limitkit/limitkit/core"
)

// Adapter describes an adapter to [NewAdapterEngine]: its name, the
// adapter options it reads, and what of the common options it can
// honour. The engine rejects, at construction and with an error naming
// the option, every option the adapter would silently ignore: another
// adapter's option (the error names this adapter's equivalent: its
// option of the same name, or for another's counting by outcome (an
// [AdapterOption] of an [Outcome]) its [WithOutcome]), an adapter option
// the adapter does not declare or of another type, [WithOutcome] given
// to an adapter that never reports outcomes, [WithDenyStatus] or [WithDenyBody] given to one that writes
// no HTTP response. The zero value (with a Name) describes an HTTP
// adapter without adapter options that does not count by outcome: what
// a plain HTTP adapter is. An Adapter is read once, by [NewAdapterEngine].
type Adapter struct {
	// Name is the adapter's package name ("mylimit"). It prefixes every
	// error ("mylimit: WithKey(nil): ...") and is the adapter name of its
	// [AdapterOption]s. Required.
	Name string
	// Options declares the adapter options the adapter reads: each
	// option's name (as its With function is named: "WithDenyHandler")
	// and the type of its value,
	//
	//	httplimit.Adapter{Name: "mylimit", Options: map[string]reflect.Type{
	//		"WithDenyHandler": reflect.TypeFor[DenyHandler](),
	//	}}
	//
	// [AdapterOption]s of this adapter with another name are rejected (a
	// misspelt name), and so are values not assignable to the declared
	// type; a value assignable to it (a function literal of the handler's
	// signature) is converted, so that the adapter's type assertion, or
	// [AdapterOptionValue], finds it.
	Options map[string]reflect.Type
	// Outcome says the adapter calls [Engine.Outcome] after the handler of
	// every request the engine passed, when [Engine.CountsOutcome]
	// reports true. Without it [WithOutcome] is rejected: nothing would
	// ever be counted.
	Outcome bool
	// NoHTTPResponse says the adapter writes no HTTP response (gRPC): the
	// options that only shape one, [WithDenyStatus] and [WithDenyBody],
	// are rejected. The header options still apply to whatever carries
	// the fields ([Engine.Fields]).
	NoHTTPResponse bool
	// Denials tells a user what to do instead, in the errors rejecting an
	// option this adapter cannot honour (an HTTP-only option, another
	// adapter's WithDenyHandler): how its denials are shaped and customised,
	// e.g. "grpclimit denies with codes.ResourceExhausted and its
	// details". Optional.
	Denials string
}

// NewAdapterEngine validates the options against what adapter a
// describes and builds the Engine applying lim (and any [WithCheck]
// limiters). The first mistake is returned, prefixed by a.Name; nothing
// is built then.
func NewAdapterEngine(a Adapter, lim *core.Limiter, opts ...Option) (*Engine, error) {
	return newEngine(&a, lim, opts)
}

// AdapterOptionValue returns the value of the adapter option name given
// to e (see [AdapterOption] and [Adapter.Options]), typed: the zero T and
// nil when it was not given, an error when it was given and is not a T
// (the adapter declared the option with another type: a bug of the
// adapter, for its constructor to return). The value of a declared
// option has its declared type, whatever the user passed to
// AdapterOption. When the option was given twice, the last one wins.
func AdapterOptionValue[T any](e *Engine, name string) (T, error) {
	var zero T
	var v any
	for _, a := range e.cfg.adapter { // the last one given wins
		if a.name == name {
			v = a.v
		}
	}
	if v == nil {
		return zero, nil
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%s: option %s holds a %T, read as a %v: declare it as reflect.TypeFor[%v]()", e.pkg, name, v, reflect.TypeFor[T](), reflect.TypeFor[T]())
	}
	return t, nil
}

// checkAdapter rejects what adapter a cannot honour among c's options,
// and converts the values of its declared adapter options to their
// declared types.
func (c *config) checkAdapter(a *Adapter) {
	for i := range c.adapter {
		v := &c.adapter[i]
		if v.adapter != a.Name {
			c.fail("%s.%s is an option of package %s, given to %s middleware: %s",
				v.adapter, v.name, v.adapter, article(a.Name), a.equivalent(v))
			continue
		}
		typ := a.Options[v.name]
		if typ == nil {
			c.fail("%s.%s is not an option of package %s (it reads %s)", v.adapter, v.name, a.Name, a.declaredNames())
			continue
		}
		rv := reflect.ValueOf(v.v)
		if rv.Type() == typ {
			continue
		}
		if !rv.Type().AssignableTo(typ) {
			c.fail("%s.%s: a %v given, want a %v", v.adapter, v.name, rv.Type(), typ)
			continue
		}
		cv := reflect.New(typ).Elem()
		cv.Set(rv)
		v.v = cv.Interface()
	}
	if a.NoHTTPResponse && len(c.httpOnly) > 0 {
		c.fail("httplimit.%s shapes an HTTP response, which %s middleware does not write: remove it%s",
			c.httpOnly[0], article(a.Name), a.denials())
	}
	if c.conc != nil && !a.Outcome {
		c.fail("httplimit.WithConcurrency holds a slot until the handler returns, which %s middleware does not report (it never calls Engine.Outcome): remove it", article(a.Name))
	}
	if c.pol.count != nil && !a.Outcome {
		c.fail("httplimit.WithOutcome counts by the response's outcome, which %s middleware does not report (it never calls Engine.Outcome): remove it", article(a.Name))
	}
	if c.pol.byStatus && c.pol.byAdapter != "" {
		c.fail("%s and httplimit.WithOutcome both set counting by outcome, their Counts seeing different numbers "+
			"(httplimit.WithOutcome's, also an HTTP adapter's WithOutcome and a rules file's count:, sees HTTP statuses): give one of the two",
			c.pol.byAdapter)
	}
}

// equivalent tells the user of adapter a what to use in place of another
// adapter's option v: a's option of the same name; for counting by
// outcome, the common httplimit.WithOutcome;
// else that a has none, with how a denies in place of another's deny
// handler.
func (a *Adapter) equivalent(v *adapterValue) string {
	switch {
	case a.Options[v.name] != nil:
		return "use " + a.Name + "." + v.name
	case v.outcome && a.Outcome:
		return "use httplimit.WithOutcome, whose Count sees HTTP statuses"
	case v.name == "WithDenyHandler":
		return "package " + a.Name + " has no equivalent" + a.denials()
	}
	return "package " + a.Name + " has no equivalent"
}

// denials is a.Denials as the end of an error: what to do instead of an
// option a cannot honour.
func (a *Adapter) denials() string {
	if a.Denials == "" {
		return ""
	}
	return " (" + a.Denials + ")"
}

// article returns name with its indefinite article, by its first letter:
// "a nethttp", "an echolimit".
func article(name string) string {
	if name != "" && strings.ContainsRune("aeiouAEIOU", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}

// declaredNames lists a's adapter options for an error message.
func (a *Adapter) declaredNames() string {
	if len(a.Options) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(a.Options)), ", ")
}
